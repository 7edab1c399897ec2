package pingdest

import (
	"flag"
	"strings"
	"testing"
)

func TestParseArgs(t *testing.T) {
	for _, c := range []struct {
		args []string
		peer string
		ok   bool
	}{
		{nil, "", true},
		{[]string{"-s", "64"}, "", true},
		{[]string{"-s", "64", "10.0.0.1"}, "10.0.0.1", true},
		{[]string{"a", "b"}, "", false},
		{[]string{"-x"}, "", false},
	} {
		var usage strings.Builder
		fs := flag.NewFlagSet("pingpong", flag.ContinueOnError)
		fs.SetOutput(&usage)
		fs.Int("s", 4096, "message `size`")
		peer, err := ParseArgs(fs, c.args)
		if peer != c.peer || (err == nil) != c.ok {
			t.Errorf("%q: %q, %v", c.args, peer, err)
		}
		if !c.ok && !strings.Contains(usage.String(), "pingpong [flags] <host>  connect to server at <host>") {
			t.Errorf("%q: usage %q", c.args, usage.String())
		}
	}
}
