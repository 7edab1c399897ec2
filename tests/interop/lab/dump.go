package lab

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"

	"github.com/uroce/uroce/internal/pcapfile"
)

// DumpSummary is uroce-dump's --stats summary of a capture: the counts of
// its JSON "stats" object.
type DumpSummary struct {
	Frames    int `json:"frames"`
	RoCE      int `json:"roce"`
	Other     int `json:"other"`
	Malformed int `json:"malformed"`
	ICRCBad   int `json:"icrc_bad"`
	UDPCsBad  int `json:"udp_cs_bad"`
}

// uroceDump is the command that decodes captures for users; the capture
// check runs it rather than a decoder of its own, so what a clean run
// must pass is what a user reading its pcap with uroce-dump would see.
// `go run` caches the built executable, so only the first call builds.
const uroceDump = "github.com/uroce/uroce/cmd/uroce-dump"

// Dump writes recs to a temporary pcap file and returns uroce-dump's
// summary of it (uroce-dump -r FILE --stats -q --json).
func Dump(recs []pcapfile.Record) (DumpSummary, error) {
	var d DumpSummary
	f, err := os.CreateTemp("", "uroce-lab-*.pcap")
	if err != nil {
		return d, fmt.Errorf("uroce-dump: %w", err)
	}
	defer os.Remove(f.Name())
	w, err := pcapfile.NewWriter(f, pcapfile.LinkTypeEthernet, captureSnap)
	for _, r := range recs {
		if err != nil {
			break
		}
		err = w.Write(r.Time, r.Data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return d, fmt.Errorf("uroce-dump: write %s: %w", f.Name(), err)
	}
	var out, errb bytes.Buffer
	cmd := exec.Command("go", "run", uroceDump, "-r", f.Name(), "--stats", "-q", "--json")
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return d, fmt.Errorf("uroce-dump: %w\n%s", err, errb.String())
	}
	var j struct {
		Stats *DumpSummary `json:"stats"`
	}
	j.Stats = &d
	if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &j); err != nil {
		return d, fmt.Errorf("uroce-dump: summary %q: %w", out.String(), err)
	}
	return d, nil
}
