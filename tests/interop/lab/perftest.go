package lab

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// PerftestReport is the result table perftest prints at the end of a run.
type PerftestReport struct {
	Bytes      int
	Iterations int
	// Values by column name as perftest prints it, e.g. "t_typical[usec]",
	// "99% percentile[usec]", "BW average[MB/sec]", "MsgRate[Mpps]".
	Values map[string]float64
}

// ErrNoReport means perftest's output holds no result table, as when it
// failed, or on the passive side of a test that prints none.
var ErrNoReport = errors.New("no perftest report")

// perftestColumn matches one heading of perftest's result table: "#bytes",
// "#iterations", or a name with a unit in brackets, which may contain
// single spaces ("BW peak[MB/sec]"); headings are separated by runs of
// spaces, but "#bytes #iterations" only by one.
var perftestColumn = regexp.MustCompile(`#\w+|[^\s#][^\[\]]*?\[[^\]]*\]`)

// ParsePerftest reads the first result table (latency or bandwidth) in
// perftest's standard output.
func ParsePerftest(out string) (PerftestReport, error) {
	lines := strings.Split(out, "\n")
	for i, line := range lines {
		if !strings.HasPrefix(strings.TrimSpace(line), "#bytes") {
			continue
		}
		cols := perftestColumn.FindAllString(line, -1)
		for _, data := range lines[i+1:] {
			fields := strings.Fields(data)
			if len(fields) == 0 {
				continue
			}
			if strings.HasPrefix(fields[0], "---") {
				break
			}
			return parseRow(cols, fields)
		}
		return PerftestReport{}, fmt.Errorf("%w: a heading without a row", ErrNoReport)
	}
	return PerftestReport{}, ErrNoReport
}

func parseRow(cols, fields []string) (PerftestReport, error) {
	r := PerftestReport{Values: map[string]float64{}}
	if len(cols) < 2 || cols[0] != "#bytes" || cols[1] != "#iterations" || len(fields) < 2 {
		return r, fmt.Errorf("perftest report: unexpected table %q / %q", cols, fields)
	}
	var err error
	if r.Bytes, err = strconv.Atoi(fields[0]); err != nil {
		return r, fmt.Errorf("perftest report: #bytes: %w", err)
	}
	if r.Iterations, err = strconv.Atoi(fields[1]); err != nil {
		return r, fmt.Errorf("perftest report: #iterations: %w", err)
	}
	for i := 2; i < len(cols) && i < len(fields); i++ {
		f := fields[i]
		// perftest prints C's "-nan" (e.g. a standard deviation when
		// its cycle counts misbehave under emulation); Go reads only NaN.
		if strings.EqualFold(strings.TrimLeft(f, "+-"), "nan") {
			f = "NaN"
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return r, fmt.Errorf("perftest report: %s: %w", cols[i], err)
		}
		r.Values[cols[i]] = v
	}
	return r, nil
}
