// Package hist is a fixed-size log-linear histogram for latencies, cheap
// enough to stay on in a data path: recording a value is a few shifts and
// two atomic adds, with no allocation and no lock, and a reader on another
// goroutine takes a Snapshot at any time.
//
// The buckets are HdrHistogram's layout with 32 sub-buckets per power of
// two: values below 64 have a bucket each, and every octave [2^k, 2^(k+1))
// above is cut into 32 equal buckets. A bucket is therefore at most 1/32 of
// its lower bound wide, and Quantile, which answers a bucket's midpoint,
// is within 1/64 (1.6 %) of the true sample at that rank. Values up to
// MaxValue (2^37-1, about 137 s when they are nanoseconds) are kept; larger
// ones count in the last bucket, and Max stays exact.
//
// A Histogram is about 8.5 KiB of counters; a Snapshot is a plain copy
// that can be merged with others and queried for quantiles, the mean and
// the maximum. A Table holds many histograms that one owner writes and
// reads, a slot each, in dense arrays by bucket: a QP engine's per-QP
// latencies, where thousands of Histograms would put every record on a
// cold page.
package hist
