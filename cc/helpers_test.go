package cc_test

import (
	"testing"
	"time"

	"github.com/uroce/uroce/cc"
)

// t0 is the fake clock's origin; tests step it exactly.
var t0 = time.Unix(1_000_000, 0)

func at(d time.Duration) time.Time { return t0.Add(d) }

const us = time.Microsecond

func newDCQCN(t testing.TB, p cc.DCQCNParams, line cc.Rate) *cc.DCQCN {
	t.Helper()
	d, err := cc.NewDCQCN(p, cc.FirmwareNP(), line)
	if err != nil {
		t.Fatalf("NewDCQCN: %v", err)
	}
	return d
}

// cutOf is one DCQCN cut at α as the firmware computes it, with GD 11.
func cutOf(r cc.Rate, alpha uint64) cc.Rate { return r - cc.Rate(uint64(r)*alpha>>11) }
