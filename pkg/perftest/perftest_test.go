package perftest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/internal/perftestcap"
)

// tcpStreams returns the bytes the client (ephemeral port) and the server
// (port 18515) sent over perftest's TCP connection in a capture.
func tcpStreams(t *testing.T, name string) (client, server []byte) {
	t.Helper()
	client, server, err := perftestcap.TCPStreams("../../testdata/rxe-captures/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return client, server
}

// recorded plays a peer from its recorded bytes and keeps what we write.
type recorded struct {
	peer  *bytes.Reader
	wrote bytes.Buffer
}

func (r *recorded) Read(p []byte) (int, error)  { return r.peer.Read(p) }
func (r *recorded) Write(p []byte) (int, error) { return r.wrote.Write(p) }

func firstDest(t *testing.T, stream []byte) Dest {
	t.Helper()
	d, err := ParseDest(stream[16+4+4+2 : 16+4+4+2+destLen])
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestReplayCaptures runs each side of the exchange against the other
// side's bytes as real perftest 4.5 sent them, and checks that uroce writes
// exactly what perftest wrote on that side.
func TestReplayCaptures(t *testing.T) {
	tests := []struct {
		file       string
		handshakes int
		bw, close  bool
	}{
		{"ib_write_lat.pcap", 4, false, false},
		{"ib_read_lat.pcap", 4, false, true},
		{"ib_write_bw.pcap", 4, true, true},
	}
	for _, tt := range tests {
		client, server := tcpStreams(t, tt.file)
		for _, side := range []struct {
			name         string
			client       bool
			mine, theirs []byte
		}{{"client", true, client, server}, {"server", false, server, client}} {
			rec := &recorded{peer: bytes.NewReader(side.theirs)}
			c := NewConn(rec, side.client)
			sys, err := c.Hello(SysData{PageSize: 4096, CacheLine: 64, MTU: 3})
			if err != nil {
				t.Fatalf("%s %s: %v", tt.file, side.name, err)
			}
			if c.RemoteVersion != "6.06" || sys != (SysData{4096, 64, 3}) {
				t.Errorf("%s %s: peer %q, settled %+v", tt.file, side.name, c.RemoteVersion, sys)
			}
			me, peer := firstDest(t, side.mine), firstDest(t, side.theirs)
			for range tt.handshakes {
				got, err := c.HandShake(me)
				if err != nil || got != peer {
					t.Fatalf("%s %s: handshake got %+v, %v; want %+v", tt.file, side.name, got, err, peer)
				}
			}
			if tt.bw {
				// Our report is whatever this side sent; the peer's is
				// read back from its bytes.
				off := rec.wrote.Len()
				mine := side.mine[off : off+40]
				rep := BWReport{
					Size: binary.BigEndian.Uint64(mine), Iters: binary.BigEndian.Uint64(mine[8:]),
					BWPeak:  math.Float64frombits(binary.BigEndian.Uint64(mine[16:])),
					BWAvg:   math.Float64frombits(binary.BigEndian.Uint64(mine[24:])),
					MsgRate: math.Float64frombits(binary.BigEndian.Uint64(mine[32:])),
				}
				got, err := c.ExchangeBWReports(rep)
				if err != nil {
					t.Fatal(err)
				}
				if side.client && (got.Size == 0 && got.Iters == 0) {
					t.Errorf("%s: no report from the server", tt.file)
				}
				if !side.client && (got.Size != 4096 || got.Iters != 20) {
					t.Errorf("%s server: client's report %+v, want 4096 bytes × 20", tt.file, got)
				}
			}
			if tt.close {
				if err := c.Close(me); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(rec.wrote.Bytes(), side.mine) {
				t.Errorf("%s %s: wrote %d bytes, perftest wrote %d\n got %q\nwant %q", tt.file, side.name,
					rec.wrote.Len(), len(side.mine), rec.wrote.Bytes(), side.mine)
			}
		}
	}
}

func TestDest(t *testing.T) {
	const msg = "0000:0001:000011:8c5b84:000002cb:0000561170c4f000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:0c:00000000:"
	d, err := ParseDest([]byte(msg + "\x00"))
	if err != nil {
		t.Fatal(err)
	}
	want := Dest{OutReads: 1, QPN: 0x11, PSN: 0x8c5b84, RKey: 0x2cb, VAddr: 0x561170c4f000,
		GID: [16]byte{10: 0xff, 11: 0xff, 12: 0x0a, 13: 0x4d, 15: 0x0c}}
	if d != want || d.String() != msg || d.GIDAddr().Unmap().String() != "10.77.0.12" {
		t.Errorf("parsed %+v (%s), %v", d, d.String(), d.GIDAddr())
	}
	for _, bad := range []string{"", "0000:0001", strings.Replace(msg, "8c5b84", "8c5z84", 1), msg + "00:", strings.Replace(msg, "000011", "1000011", 1)} {
		if _, err := ParseDest([]byte(bad)); !errors.Is(err, ErrProtocol) {
			t.Errorf("ParseDest(%q): %v", bad, err)
		}
	}
}

func TestHelloRejectsOldAndSettles(t *testing.T) {
	peer := func(version string, page, line uint32, mtu string) *recorded {
		var b bytes.Buffer
		v := make([]byte, 16)
		copy(v, version)
		b.Write(v)
		binary.Write(&b, binary.BigEndian, page)
		binary.Write(&b, binary.BigEndian, line)
		b.WriteString(mtu)
		return &recorded{peer: bytes.NewReader(b.Bytes())}
	}
	if _, err := NewConn(peer("5.60", 4096, 64, "3\x00"), true).Hello(SysData{4096, 64, 5}); !errors.Is(err, ErrIncompatible) {
		t.Errorf("old peer: %v", err)
	}
	got, err := NewConn(peer("6.29", 65536, 128, "2\x00"), true).Hello(SysData{4096, 64, 5})
	if err != nil || got != (SysData{65536, 128, 2}) {
		t.Errorf("settled %+v, %v", got, err)
	}
	if _, err := NewConn(peer("6.06", 4096, 64, ""), true).Hello(SysData{4096, 64, 3}); !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		t.Errorf("cut stream: %v", err)
	}
}

func stamps(deltas ...time.Duration) []time.Duration {
	out := []time.Duration{0}
	for _, d := range deltas {
		out = append(out, out[len(out)-1]+d)
	}
	return out
}

func TestLatency(t *testing.T) {
	us := time.Microsecond
	// Round trips of 10, 12, 14, 16, 18, 100, 200 µs: the last two are
	// dropped, t_max is the next (100), the median of the first five is 14.
	r, err := Latency(64, stamps(18*us, 10*us, 200*us, 14*us, 100*us, 12*us, 16*us), true)
	if err != nil {
		t.Fatal(err)
	}
	// n = 7 - 2 = 5 sorted: 10 12 14 16 18 | 100 200 (halved for RTT).
	want := LatencyReport{Bytes: 64, Iters: 8, Min: 5, Max: 50, Typical: 7, Avg: 7, P99: 50, P999: 50}
	// Differences from 7: -2 -1 0 1 2 → squares 4 1 0 1 4 → sqrt(10/5).
	want.Stdev = math.Sqrt(2)
	if r != want {
		t.Errorf("got %+v\nwant %+v", r, want)
	}
	// Even count: mean of the middle two; one-way (read) is not halved.
	r, _ = Latency(2, stamps(10*us, 20*us, 30*us, 40*us, 90*us, 99*us), false)
	if r.Typical != 25 || r.Min != 10 || r.Max != 90 {
		t.Errorf("even count: %+v", r)
	}
	if _, err := Latency(2, stamps(1, 2), true); !errors.Is(err, ErrTooFewSamples) {
		t.Errorf("too few: %v", err)
	}
	var b bytes.Buffer
	r.WriteHeader(&b)
	r.WriteTo(&b)
	if !strings.Contains(b.String(), "t_typical[usec]") || !strings.Contains(b.String(), " 2       7          10.00  ") {
		t.Errorf("report:\n%s", b.String())
	}
}

func TestBandwidth(t *testing.T) {
	// 4 iterations of 1 MiB, each completing 1 ms after its post, posted
	// 1 ms apart, signaled every completion.
	ms := time.Millisecond
	posted := []time.Duration{0, ms, 2 * ms, 3 * ms}
	completed := []time.Duration{ms, 2 * ms, 3 * ms, 4 * ms}
	r := Bandwidth(1<<20, posted, completed, 1, 1, false)
	// Average: 4 MiB in 4 ms = 1000 MiB/s; peak: 1 MiB per ms.
	if math.Abs(r.Avg-1000) > 1e-9 || math.Abs(r.Peak-1000) > 1e-9 || math.Abs(r.MsgRate-0.001) > 1e-12 {
		t.Errorf("%+v", r)
	}
	g := Bandwidth(125000000/1000, posted, completed, 2, 1, true)
	if math.Abs(g.Avg-1) > 1e-9 {
		t.Errorf("Gb/s: %+v", g)
	}
	var b bytes.Buffer
	g.WriteHeader(&b)
	g.WriteTo(&b)
	if !strings.Contains(b.String(), "BW peak[Gb/sec]") {
		t.Errorf("report:\n%s", b.String())
	}
}

// TestBandwidthNoPeak checks -N's report: Bandwidth's average and rate,
// no peak.
func TestBandwidthNoPeak(t *testing.T) {
	ms := time.Millisecond
	posted := []time.Duration{0, ms, 2 * ms, 3 * ms}
	completed := []time.Duration{ms, 2 * ms, 3 * ms, 4 * ms}
	for _, gbits := range []bool{false, true} {
		r, want := BandwidthNoPeak(1<<20, posted, completed, gbits), Bandwidth(1<<20, posted, completed, 1, 1, gbits)
		want.Peak = 0
		if r != want || r.Avg <= 0 {
			t.Errorf("gbits %v: %+v, want %+v", gbits, r, want)
		}
	}
	if r := BandwidthNoPeak(64, nil, nil, false); r != (BandwidthReport{Bytes: 64}) {
		t.Errorf("no iterations: %+v", r)
	}
}

func TestDurationBandwidth(t *testing.T) {
	// 3000 messages of 1 MiB counted in 3 s: 1000 MiB/s, 0.001 Mpps,
	// no peak; the iterations column is the count.
	r := DurationBandwidth(1<<20, 3000, 3*time.Second, 1, false)
	if r.Iters != 3000 || r.Peak != 0 || math.Abs(r.Avg-1000) > 1e-9 || math.Abs(r.MsgRate-0.001) > 1e-12 {
		t.Errorf("%+v", r)
	}
	// --run_infinitely -b in WRITE and READ tests doubles both.
	if r2 := DurationBandwidth(1<<20, 3000, 3*time.Second, 2, false); math.Abs(r2.Avg-2000) > 1e-9 || math.Abs(r2.MsgRate-0.002) > 1e-12 {
		t.Errorf("factor 2: %+v", r2)
	}
	if g := DurationBandwidth(125000000/1000, 1000, time.Second, 1, true); math.Abs(g.Avg-1) > 1e-9 {
		t.Errorf("Gb/s: %+v", g)
	}
	if z := DurationBandwidth(8, 0, 0, 1, false); z.Avg != 0 || z.MsgRate != 0 {
		t.Errorf("no time: %+v", z)
	}
}
