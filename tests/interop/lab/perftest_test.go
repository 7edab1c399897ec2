package lab_test

import (
	"errors"
	"math"
	"testing"

	"github.com/uroce/uroce/tests/interop/lab"
)

// Tables as perftest 4.5 printed them in the lab (tabs included).
const (
	latOutput = ` local address: LID 0000 QPN 0x0011 PSN 0x8c5b84 RKey 0x0002cb VAddr 0x0056
---------------------------------------------------------------------------------------
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] 
 64      20          395.25         13663.33      3297.92  	       4275.40     	3460.82		13663.33 		13663.33
---------------------------------------------------------------------------------------
`
	bwOutput = `---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 65536      50               7.94               2.28   		   0.000036
---------------------------------------------------------------------------------------
`
	// As ib_write_lat printed it in a TCG guest on a busy host, when its
	// CPU clock estimate came out as 0.
	nanOutput = ` #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] 
 64      20          inf            inf          inf      	       inf         	-nan   		inf     		inf    
`
	passiveOutput = `---------------------------------------------------------------------------------------
                    RDMA_Read Latency Test
 local address: LID 0000 QPN 0x0012 PSN 0x2d599c
---------------------------------------------------------------------------------------
`
)

func TestParsePerftest(t *testing.T) {
	for _, c := range []struct {
		name         string
		out          string
		bytes, iters int
		col          string
		val          float64
	}{
		{"lat", latOutput, 64, 20, "t_typical[usec]", 3297.92},
		{"lat percentile", latOutput, 64, 20, "99.9% percentile[usec]", 13663.33},
		{"bw", bwOutput, 65536, 50, "BW average[MB/sec]", 2.28},
		{"bw rate", bwOutput, 65536, 50, "MsgRate[Mpps]", 0.000036},
	} {
		r, err := lab.ParsePerftest(c.out)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if r.Bytes != c.bytes || r.Iterations != c.iters || r.Values[c.col] != c.val {
			t.Errorf("%s: got %d × %d, %s = %v (all: %v); want %d × %d, %v", c.name,
				r.Bytes, r.Iterations, c.col, r.Values[c.col], r.Values, c.bytes, c.iters, c.val)
		}
	}
	if r, err := lab.ParsePerftest(nanOutput); err != nil || r.Iterations != 20 ||
		!math.IsNaN(r.Values["t_stdev[usec]"]) || !math.IsInf(r.Values["t_typical[usec]"], 1) {
		t.Errorf("inf and -nan in a report: %v, %v; want 20 iterations, t_stdev NaN, t_typical +Inf", r, err)
	}
	if _, err := lab.ParsePerftest(passiveOutput); !errors.Is(err, lab.ErrNoReport) {
		t.Errorf("passive side's output: %v, want ErrNoReport", err)
	}
}
