package cc

import "time"

// NPParams configure the notification point: the receiver's side of DCQCN
// that answers CE-marked packets with CNPs.
type NPParams struct {
	// Enabled turns CNP generation on (ConnectX: ROCE_CC_PRIO_MASK, per
	// priority; here per QP).
	Enabled bool
	// MinTimeBetweenCNPs is the least time between two CNPs sent for one
	// QP; 0 sends one CNP per CE-marked packet. Unit µs in every source:
	// ConnectX has it per port (mlx5 debugfs np_min_time_between_cnps,
	// added to the kernel in 2020 with "Unit = microseconds", default 0;
	// NVConfig MIN_TIME_BETWEEN_CNPS); the DCQCN paper's N is 50 µs per
	// flow (§3.2); the HPCC authors' ns-3 marks the ACK of every CE packet,
	// so 0.
	MinTimeBetweenCNPs time.Duration
}

// FirmwareNP returns ConnectX's defaults: enabled, at most one CNP per 4 µs
// per QP (min_time_between_cnps).
func FirmwareNP() NPParams {
	return NPParams{Enabled: true, MinTimeBetweenCNPs: 4 * time.Microsecond}
}

// PaperNP returns the DCQCN paper's notification point: at most one CNP per
// N = 50 µs per flow (§3.2).
func PaperNP() NPParams {
	return NPParams{Enabled: true, MinTimeBetweenCNPs: 50 * time.Microsecond}
}

// NP is the notification point state of one QP. Every Algorithm embeds one;
// it is exported for engines that keep the receive side apart.
type NP struct {
	p    NPParams
	last time.Time // when the last CNP was sent; zero before the first
	sent bool

	// The marks an engine hands over at one time: a burst it read
	// together, whose packets arrived over the time since the CNP before
	// it (base).
	burstAt    time.Time
	base       time.Time
	burstMarks int
	burstCNPs  int
}

// NewNP returns a notification point with parameters p.
func NewNP(p NPParams) NP { return NP{p: p} }

// OnCE records a CE-marked packet received for this QP at now, and reports
// whether a CNP should go to the sender's QP now: the first mark always
// answers, later ones only once MinTimeBetweenCNPs has passed since the last
// CNP (DCQCN §3.2; the firmware coalesces the same way).
//
// Marks given at one now are a burst that an engine read late and together
// (a socket's backlog): their packets arrived over the time since the CNP
// before the burst, so the burst answers as many of its marks as that time
// holds intervals, as the NP would have had it seen each packet arrive.
// One mark per now, as a simulator or a prompt engine gives them, gets
// exactly the rule above.
func (n *NP) OnCE(now time.Time, c *Counters) bool {
	c.NPECNMarkedRoCEPackets++
	if !n.p.Enabled {
		return false
	}
	if !n.sent || n.p.MinTimeBetweenCNPs <= 0 {
		return n.send(now, c)
	}
	if !now.Equal(n.burstAt) {
		n.burstAt, n.base, n.burstMarks, n.burstCNPs = now, n.last, 0, 0
	}
	n.burstMarks++
	owed := min(n.burstMarks, int(now.Sub(n.base)/n.p.MinTimeBetweenCNPs))
	if n.burstCNPs >= owed {
		return false
	}
	n.burstCNPs++
	return n.send(now, c)
}

func (n *NP) send(now time.Time, c *Counters) bool {
	n.sent = true
	n.last = now
	c.NPCNPSent++
	return true
}
