package hist

// Table is a set of histograms, one per slot (0, 1, 2, ...), that one
// owner writes and reads: a QP engine's per-QP completion latencies.
// Record and Snapshot are not safe for concurrent use; the owner
// serializes them, so a record is plain stores, not atomic ones.
//
// Its layout is by octave and bucket, then slot: a bucket's counts of
// rowLen neighbouring slots lie together, in a row that holds the 32
// buckets of one octave (a power of two of values), and each slot's sum
// and maximum lie in one array. A Histogram per slot puts each slot's
// counts 8 KiB apart, so with thousands of slots every record meets a
// cold line on a page of its own, two of them with the sum; here the
// slots' counts for the buckets in use, and their sums, are a few dense
// arrays that stay cached (BenchmarkTable). A slot costs 16 bytes, and
// 256 for each octave its row of slots has used.
//
// The zero value is ready; Grow makes slots recordable.
type Table struct {
	stats []slotStat
	// rows holds, by octave, the counts of slots [g*rowLen,
	// (g+1)*rowLen) at rows[octave][g]; nil until one of them records
	// in the octave.
	rows [NumBuckets / sub][]*row
}

// rowLen is the slots a row counts: a row is 4 KiB, a bucket's counts in
// it two lines.
const rowLen = 16

// row holds the counts of rowLen slots in the sub buckets of one octave.
type row [sub][rowLen]uint64

type slotStat struct{ sum, max uint64 }

// Grow makes slots [0, n) recordable; it never shrinks the table. A new
// slot is empty.
func (t *Table) Grow(n int) {
	if n > len(t.stats) {
		t.stats = append(t.stats, make([]slotStat, n-len(t.stats))...)
	}
}

// Record counts v in slot's histogram, which Grow must have made. It
// allocates only when a row of slots first records in an octave: at most
// once per octave (NumBuckets/32 of them) for every rowLen slots.
func (t *Table) Record(slot int, v uint64) {
	st := &t.stats[slot]
	st.sum += v
	st.max = max(st.max, v)
	// Unsigned: a signed division by a constant corrects for the sign.
	b, g := uint(bucket(v)), uint(slot)/rowLen
	rs := t.rows[b/sub]
	if g >= uint(len(rs)) || rs[g] == nil {
		rs = t.addRow(int(b/sub), int(g))
	}
	rs[g][b%sub][uint(slot)%rowLen]++
}

// addRow gives octave o a row for group g, and returns the octave's rows.
func (t *Table) addRow(o, g int) []*row {
	rs := t.rows[o]
	if g >= len(rs) {
		// Room for every slot made so far, so an octave's rows grow
		// once as the table does.
		n := max(g+1, (len(t.stats)+rowLen-1)/rowLen)
		rs = append(rs, make([]*row, n-len(rs))...)
	}
	rs[g] = new(row)
	t.rows[o] = rs
	return rs
}

// Snapshot copies slot's histogram into s, replacing what s held.
func (t *Table) Snapshot(slot int, s *Snapshot) {
	*s = Snapshot{}
	g, i := slot/rowLen, slot%rowLen
	for o, rs := range &t.rows {
		if g >= len(rs) || rs[g] == nil {
			continue
		}
		for k := range sub {
			c := rs[g][k][i]
			s.Counts[o*sub+k] = c
			s.Count += c
		}
	}
	s.Sum, s.Max = t.stats[slot].sum, t.stats[slot].max
}

// Total copies the sum of every slot's histogram into s, replacing what
// s held.
func (t *Table) Total(s *Snapshot) {
	*s = Snapshot{}
	for o, rs := range &t.rows {
		for _, r := range rs {
			if r == nil {
				continue
			}
			for k := range sub {
				for _, c := range r[k] {
					s.Counts[o*sub+k] += c
					s.Count += c
				}
			}
		}
	}
	for _, st := range t.stats {
		s.Sum += st.sum
		s.Max = max(s.Max, st.max)
	}
}

// Clear empties slot's histogram.
func (t *Table) Clear(slot int) {
	g, i := slot/rowLen, slot%rowLen
	for _, rs := range &t.rows {
		if g < len(rs) && rs[g] != nil {
			for k := range sub {
				rs[g][k][i] = 0
			}
		}
	}
	t.stats[slot] = slotStat{}
}
