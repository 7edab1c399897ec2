package netem

// RED is the congestion point's ECN marking (DCQCN §3.1, "CP Algorithm"):
// a packet that joins an egress queue of q bytes is marked CE with
// probability 0 below Kmin, Pmax·(q−Kmin)/(Kmax−Kmin) between Kmin and
// Kmax, and 1 above Kmax.
type RED struct {
	Kmin, Kmax int // bytes
	Pmax       float64
}

// PaperRED returns the paper's marking at 40 Gb/s: Kmin 5 KB, Kmax 200 KB,
// Pmax 1 %.
func PaperRED() RED { return RED{Kmin: 5 << 10, Kmax: 200 << 10, Pmax: 0.01} }

// Prob returns the marking probability at queue length q.
func (r RED) Prob(q int) float64 {
	switch {
	case q <= r.Kmin:
		return 0
	case q > r.Kmax:
		return 1
	}
	return r.Pmax * float64(q-r.Kmin) / float64(r.Kmax-r.Kmin)
}

// Mark reports whether to mark a packet at queue length q, given u drawn
// uniformly from [0, 1) by the caller (who owns the seeded random source).
func (r RED) Mark(q int, u float64) bool { return u < r.Prob(q) }
