package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"testing"

	"github.com/uroce/uroce/internal/perftestcap"
	"github.com/uroce/uroce/pkg/perftest"
)

// canned is a runner with no RDMA behind it: its Dest and bandwidth report
// are the ones perftest sent on the side it stands in for, so that the
// session's bytes can be compared with perftest's byte for byte.
type canned struct {
	dest   perftest.Dest
	rep    perftest.BWReport
	remote []perftest.Dest
	calls  []string
}

func (c *canned) Setup(sys perftest.SysData) ([]perftest.Dest, error) {
	c.calls = append(c.calls, fmt.Sprintf("setup %d/%d/%d", sys.PageSize, sys.CacheLine, sys.MTU))
	return []perftest.Dest{c.dest}, nil
}

func (c *canned) Connect(remote []perftest.Dest) error {
	c.remote = remote
	c.calls = append(c.calls, "connect")
	return nil
}

func (c *canned) PostRecvs(size int) error {
	c.calls = append(c.calls, fmt.Sprintf("recv %d", size))
	return nil
}

func (c *canned) Latency(size int) (perftest.LatencyReport, error) {
	c.calls = append(c.calls, fmt.Sprintf("lat %d", size))
	return perftest.LatencyReport{Bytes: size}, nil
}

func (c *canned) Bandwidth(size int) (perftest.BandwidthReport, error) {
	c.calls = append(c.calls, fmt.Sprintf("bw %d", size))
	return perftest.BandwidthReport{Bytes: int(c.rep.Size), Iters: int(c.rep.Iters), Peak: c.rep.BWPeak, Avg: c.rep.BWAvg, MsgRate: c.rep.MsgRate}, nil
}

// helloLen is the length of Hello's messages: version, page size, cache
// line, MTU.
const helloLen = 16 + 4 + 4 + 2

// TestReplayCaptures runs uroce-perf's exchange for each test, on each
// side, against the other side's bytes as perftest 4.5 sent them on rxe,
// and checks that it writes exactly what perftest wrote on that side (the
// same messages in the same order, ending the same way), reads all the
// peer sent, and runs the test where perftest did.
func TestReplayCaptures(t *testing.T) {
	tests := []struct {
		test, file  string
		size, iters int
		// calls are the runner calls of the client and of the server.
		client, server []string
	}{
		{"write_lat", "ib_write_lat.pcap", 64, 50,
			[]string{"setup 4096/64/3", "connect", "lat 64"}, []string{"setup 4096/64/3", "connect", "lat 64"}},
		{"read_lat", "ib_read_lat.pcap", 64, 50,
			[]string{"setup 4096/64/3", "connect", "lat 64"}, []string{"setup 4096/64/3", "connect"}},
		{"send_lat", "ib_send_lat.pcap", 64, 50,
			[]string{"setup 4096/64/3", "connect", "recv 64", "lat 64"}, []string{"setup 4096/64/3", "connect", "recv 64", "lat 64"}},
		{"atomic_lat", "ib_atomic_lat.pcap", 8, 20,
			[]string{"setup 4096/64/3", "connect", "lat 8"}, []string{"setup 4096/64/3", "connect"}},
		{"write_bw", "ib_write_bw.pcap", 4096, 20,
			[]string{"setup 4096/64/3", "connect", "bw 4096"}, []string{"setup 4096/64/3", "connect"}},
		{"read_bw", "ib_read_bw.pcap", 3000, 10,
			[]string{"setup 4096/64/3", "connect", "bw 3000"}, []string{"setup 4096/64/3", "connect"}},
		{"send_bw", "ib_send_bw.pcap", 2050, 10,
			[]string{"setup 4096/64/3", "connect", "bw 2050"}, []string{"setup 4096/64/3", "connect", "recv 2050", "bw 2050"}},
	}
	for _, tt := range tests {
		client, server, err := perftestcap.TCPStreams("../../testdata/rxe-captures/" + tt.file)
		if err != nil {
			t.Fatal(err)
		}
		for _, side := range []struct {
			name         string
			server       bool
			mine, theirs []byte
			calls        []string
		}{{"client", false, client, server, tt.client}, {"server", true, server, client, tt.server}} {
			t.Run(tt.test+"/"+side.name, func(t *testing.T) {
				k, _ := kindByName(tt.test)
				args := []string{"-s", fmt.Sprint(tt.size), "-n", fmt.Sprint(tt.iters)}
				if !side.server {
					args = append(args, "10.77.0.11")
				}
				cfg, err := parseArgs(k, args, io.Discard)
				if err != nil {
					t.Fatal(err)
				}
				dest, err := perftest.ParseDest(side.mine[helloLen : helloLen+108])
				if err != nil {
					t.Fatal(err)
				}
				r := &canned{dest: dest}
				if k.bw && k.verb != verbSend && !side.server {
					// The stream ends with the report (40 bytes), the
					// closing handshake and "done".
					b := side.mine[len(side.mine)-5-108-40:]
					r.rep = perftest.BWReport{Size: binary.BigEndian.Uint64(b), Iters: binary.BigEndian.Uint64(b[8:]),
						BWPeak:  math.Float64frombits(binary.BigEndian.Uint64(b[16:])),
						BWAvg:   math.Float64frombits(binary.BigEndian.Uint64(b[24:])),
						MsgRate: math.Float64frombits(binary.BigEndian.Uint64(b[32:]))}
				}
				peer := perftestcap.NewPeer(side.theirs)
				out := &printer{w: io.Discard, cfg: cfg}
				s := &session{cfg: cfg, conn: perftest.NewConn(peer, !side.server), r: r, out: out, server: side.server,
					sys: perftest.SysData{PageSize: 4096, CacheLine: 64, MTU: 3}}
				if err := s.run(); err != nil {
					t.Fatalf("run: %v (wrote %d of perftest's %d bytes)", err, len(peer.Wrote), len(side.mine))
				}
				want := side.mine
				if k.bw && k.verb != verbSend && side.server && len(peer.Wrote) == len(want) {
					// perftest's passive server sends its report
					// uninitialised (my_bw_rep is never filled) and
					// the client ignores it; ours is zeros.
					at := len(want) - 5 - 108 - 40
					if rep := peer.Wrote[at : at+40]; !bytes.Equal(rep, make([]byte, 40)) {
						t.Errorf("server report %x, want zeros", rep)
					}
					want = bytes.Clone(want)
					clear(want[at : at+40])
				}
				if !bytes.Equal(peer.Wrote, want) {
					t.Errorf("wrote %d bytes, perftest wrote %d\n got %q\nwant %q", len(peer.Wrote), len(side.mine), peer.Wrote, side.mine)
				}
				// Everything the peer sent is read but its final
				// "done", which perftest does not read either.
				unread := side.theirs[len(side.theirs)-peer.Unread():]
				if len(unread) != 0 && string(unread) != "done\x00" {
					t.Errorf("left %q of the peer's bytes unread", unread)
				}
				if tt.test != "write_lat" && string(peer.Wrote[len(peer.Wrote)-5:]) != "done\x00" {
					t.Errorf("did not end with done: %q", peer.Wrote[len(peer.Wrote)-5:])
				}
				if fmt.Sprint(r.calls) != fmt.Sprint(side.calls) {
					t.Errorf("runner calls %q, want %q", r.calls, side.calls)
				}
				peerDest, err := perftest.ParseDest(side.theirs[helloLen : helloLen+108])
				if err != nil {
					t.Fatal(err)
				}
				if len(r.remote) != 1 || r.remote[0] != peerDest {
					t.Errorf("connected to %+v, want %+v", r.remote, peerDest)
				}
				if k.bw && side.server && k.verb != verbSend {
					// The server prints the client's report.
					if len(out.BW) != 1 || out.BW[0].Bytes != tt.size || out.BW[0].Iters != tt.iters {
						t.Errorf("server printed %+v, want the client's %d B x %d", out.BW, tt.size, tt.iters)
					}
				}
			})
		}
	}
}
