package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/uroce/uroce/bth"
)

// FuzzHandle runs the per-packet path on arbitrary Ethernet frames, in
// text and JSON, with a filter and statistics: it never panics, prints at
// most one line per frame, and its JSON parses.
func FuzzHandle(f *testing.F) {
	seen := map[bth.Opcode]bool{}
	for _, name := range captureFiles(f) {
		for _, b := range roceFramesAt(f, name) {
			var fr bth.Frame
			if fr.Decode(b) == nil && !seen[fr.Opcode()] {
				seen[fr.Opcode()] = true
				f.Add(b)
			}
		}
	}
	// The dumpers are made once and reset for each input: a fresh one
	// costs more than the input it reads.
	type run struct {
		out bytes.Buffer
		d   *dumper
	}
	var runs []*run
	for _, opt := range []options{
		{stats: true},
		{stats: true, json: true},
		{qp: 0x11, hasQP: true, classes: classWrite | classAck, stats: true},
	} {
		r := &run{}
		r.d = newDumper(&r.out, opt)
		r.d.link = layers.LinkTypeEthernet
		runs = append(runs, r)
	}
	ci := gopacket.CaptureInfo{Timestamp: time.Unix(1, 0)}
	f.Fuzz(func(t *testing.T, frame []byte) {
		for _, r := range runs {
			d := r.d
			r.out.Reset()
			d.out.Reset(&r.out)
			d.stats, d.shown = stats{}, 0
			clear(d.peers.peer)
			d.peers.pending = [pendingSize]pendingReq{}
			if err := d.handle(frame, ci); err != nil {
				t.Fatal(err)
			}
			if err := d.finish(); err != nil {
				t.Fatal(err)
			}
			s := r.out.String()
			if d.opt.json {
				for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
					if line == "" {
						continue
					}
					var v map[string]any
					if err := json.Unmarshal([]byte(line), &v); err != nil {
						t.Fatalf("not JSON: %v\n%s", err, line)
					}
				}
				continue
			}
			if d.stats.RoCE+d.stats.Malformed > 0 && !d.opt.hasQP && !strings.HasPrefix(s, "    1 ") {
				t.Fatalf("packet line missing:\n%s", s)
			}
		}
	})
}
