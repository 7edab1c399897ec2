package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/uroce/uroce/bth"
)

var update = flag.Bool("update", false, "rewrite the golden files")

const captureDir = "../../testdata/rxe-captures"

func captureFiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(captureDir, "*.pcap"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no captures in %s: %v", captureDir, err)
	}
	return files
}

// dumpFile runs the dumper over a capture file.
func dumpFile(t testing.TB, name string, opt options) (string, *dumper) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return dumpBytes(t, b, opt)
}

func dumpBytes(t testing.TB, capture []byte, opt options) (string, *dumper) {
	t.Helper()
	var out bytes.Buffer
	d, err := dump(&out, "capture", bytes.NewReader(capture), opt)
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), d
}

// jsonGolden are the captures whose JSON output has a golden file: between
// them every header the captures hold (RETH, AETH ACK and NAK, AtomicETH,
// AtomicAckETH, DETH, pad).
var jsonGolden = map[string]bool{
	"host_writelat_client": true, "ib_atomic_lat": true, "ibv_ud_pingpong": true, "ib_read_bw": true, "ib_send_bw": true,
}

// TestGolden compares the text and JSON output, with statistics, for every
// capture against testdata/*.golden (go test -update rewrites them).
func TestGolden(t *testing.T) {
	for _, name := range captureFiles(t) {
		base := strings.TrimSuffix(filepath.Base(name), ".pcap")
		for _, c := range []struct {
			suffix string
			opt    options
		}{
			{".golden", options{stats: true}},
			{".json.golden", options{stats: true, json: true}},
		} {
			if c.opt.json && !jsonGolden[base] {
				continue
			}
			got, _ := dumpFile(t, name, c.opt)
			golden := filepath.Join("testdata", base+c.suffix)
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs from the output:\n%s", golden, diff(string(want), got))
			}
			if c.opt.json {
				for i, line := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
					var v map[string]any
					if err := json.Unmarshal([]byte(line), &v); err != nil {
						t.Errorf("%s line %d is not JSON: %v\n%s", golden, i+1, err, line)
					}
				}
			}
		}
	}
}

// diff shows the first differing line.
func diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return "line " + itoa(i+1) + ":\nwant " + wl + "\n got " + gl
		}
	}
	return "(same lines)"
}

func itoa(i int) string { return string(appendPadded(nil, int64(i), 0)) }

// TestStatsFacts checks the summary against what the captures' README says
// each file holds.
func TestStatsFacts(t *testing.T) {
	type count struct {
		op bth.Opcode
		n  int
	}
	facts := map[string][]count{
		"ib_write_lat":         {{bth.RCWriteOnly, 103}, {bth.RCAcknowledge, 103}},
		"ib_read_lat":          {{bth.RCReadRequest, 50}, {bth.RCReadResponseOnly, 50}},
		"ib_send_lat":          {{bth.RCSendOnly, 100}, {bth.RCAcknowledge, 100}},
		"ib_write_bw":          {{bth.RCWriteFirst, 20}, {bth.RCWriteMiddle, 40}, {bth.RCWriteLast, 20}, {bth.RCAcknowledge, 20}},
		"ib_read_bw":           {{bth.RCReadRequest, 10}, {bth.RCReadResponseFirst, 10}, {bth.RCReadResponseMiddle, 10}, {bth.RCReadResponseLast, 10}},
		"ib_send_bw":           {{bth.RCSendFirst, 10}, {bth.RCSendMiddle, 10}, {bth.RCSendLast, 10}, {bth.RCAcknowledge, 10}},
		"ib_atomic_lat":        {{bth.RCFetchAdd, 20}, {bth.RCAtomicAcknowledge, 20}},
		"ib_send_lat_uc":       {{bth.UCSendOnly, 20}},
		"ibv_rc_pingpong":      {{bth.RCSendOnly, 40}, {bth.RCAcknowledge, 40}},
		"ibv_ud_pingpong":      {{bth.UDSendOnly, 40}},
		"rping":                {{bth.UDSendOnly, 5}, {bth.RCSendOnly, 20}, {bth.RCReadRequest, 5}, {bth.RCReadResponseOnly, 5}, {bth.RCWriteOnly, 5}, {bth.RCAcknowledge, 25}},
		"ib_write_lat_rdmacm":  {{bth.UDSendOnly, 10}, {bth.RCSendOnly, 20}, {bth.RCWriteOnly, 40}, {bth.RCAcknowledge, 60}},
		"host_writelat_client": {{bth.RCWriteOnly, 41}, {bth.RCAcknowledge, 41}},
	}
	total := 0
	for _, name := range captureFiles(t) {
		base := strings.TrimSuffix(filepath.Base(name), ".pcap")
		_, d := dumpFile(t, name, options{stats: true, quiet: true})
		s := &d.stats
		total += s.RoCE
		if s.ICRCBad != 0 || s.Malformed != 0 || s.UDPCsBad != 0 {
			t.Errorf("%s: %d ICRC bad, %d malformed, %d UDP checksum bad; want none", base, s.ICRCBad, s.Malformed, s.UDPCsBad)
		}
		want, ok := facts[base]
		if !ok {
			t.Errorf("%s: no facts for this capture", base)
		}
		n := 0
		for _, c := range want {
			if got := s.opcodes[c.op]; got != c.n {
				t.Errorf("%s: %d %v, want %d", base, got, c.op, c.n)
			}
			n += c.n
		}
		if n != s.RoCE {
			t.Errorf("%s: %d RoCE packets, the facts account for %d", base, s.RoCE, n)
		}
		sum := func(get func(*flow) int) (n int) {
			for _, f := range s.order {
				n += get(f)
			}
			return n
		}
		acks := sum(func(f *flow) int { return f.ACKs })
		naks := sum(func(f *flow) int { return f.NAKs })
		retrans := sum(func(f *flow) int { return f.Retrans })
		switch base {
		case "ib_write_lat":
			// 50 writes each way plus 3 retransmissions, each ACKed.
			if acks != 103 || retrans != 3 || naks != 0 {
				t.Errorf("%s: %d ACKs, %d retransmissions, %d NAKs; want 103, 3, 0", base, acks, retrans, naks)
			}
		case "host_writelat_client":
			// The probe 8 PSNs ahead gets the one NAK, PSN sequence
			// error; the peer then starts its real sequence 8 back, so
			// its 9th write repeats the probe's PSN.
			if naks != 1 || retrans != 1 {
				t.Errorf("%s: %d NAKs, %d retransmissions; want 1, 1", base, naks, retrans)
			}
			for _, f := range s.order {
				if f.NAKs == 1 && (f.nakCodes[bth.NAKPSNSequenceError] != 1 || f.key.qp != 0xabc) {
					t.Errorf("%s: NAK to QP %#x by code %v", base, f.key.qp, f.nakCodes)
				}
			}
			checkPeer(t, d, base, 0x1e, 0xabc)
		case "ib_write_bw", "ib_send_bw":
			if acks != 20 && base == "ib_write_bw" || acks != 10 && base == "ib_send_bw" {
				t.Errorf("%s: %d ACKs", base, acks)
			}
		case "ib_send_lat_uc", "ibv_ud_pingpong":
			if acks != 0 {
				t.Errorf("%s: %d ACKs, want none", base, acks)
			}
		case "ib_atomic_lat":
			if acks != 20 {
				t.Errorf("%s: %d ATOMIC ACKs, want 20", base, acks)
			}
		}
		if base != "ib_write_lat" && base != "host_writelat_client" && (retrans != 0 || naks != 0) {
			t.Errorf("%s: %d retransmissions, %d NAKs; want none", base, retrans, naks)
		}
	}
	if total != 1143 {
		t.Errorf("%d RoCE packets in all captures, the README counts 1143", total)
	}
}

func checkPeer(t *testing.T, d *dumper, base string, a, b uint32) {
	t.Helper()
	found := 0
	for k, q := range d.peers.peer {
		if k.qp == a && q == b || k.qp == b && q == a {
			found++
		}
	}
	if found != 2 {
		t.Errorf("%s: QPs %#x and %#x not learnt as peers: %v", base, a, b, d.peers.peer)
	}
}

// capture is an in-memory pcap file.
type capture struct {
	buf bytes.Buffer
	w   *pcapgo.Writer
	t   time.Time
}

func newCapture(t testing.TB) *capture {
	c := &capture{t: time.Unix(1700000000, 0)}
	c.w = pcapgo.NewWriter(&c.buf)
	if err := c.w.WriteFileHeader(65536, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *capture) add(t testing.TB, frame []byte) {
	c.t = c.t.Add(time.Millisecond)
	if err := c.w.WritePacket(gopacket.CaptureInfo{Timestamp: c.t, CaptureLength: len(frame), Length: len(frame)}, frame); err != nil {
		t.Fatal(err)
	}
}

// roceFrames returns the RoCE frames of a capture in captureDir.
func roceFrames(t testing.TB, name string) [][]byte {
	t.Helper()
	return roceFramesAt(t, filepath.Join(captureDir, name))
}

// roceFramesAt returns the RoCE frames of a capture file.
func roceFramesAt(t testing.TB, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for {
		data, _, err := r.ReadPacketData()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		var fr bth.Frame
		if fr.Decode(data) == nil {
			out = append(out, data)
		}
	}
}

func lines(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }

func TestCorruptedICRC(t *testing.T) {
	frames := roceFrames(t, "ib_write_lat.pcap")
	c := newCapture(t)
	bad := slices.Clone(frames[0])
	bad[len(bad)-5] ^= 0x40 // the last payload byte
	c.add(t, frames[1])
	c.add(t, bad)
	out, d := dumpBytes(t, c.buf.Bytes(), options{stats: true})
	l := lines(out)
	if !strings.HasSuffix(l[0], " icrc=ok") {
		t.Errorf("good frame: %s", l[0])
	}
	if !strings.Contains(l[1], "RC_RDMA_WRITE_ONLY") || !strings.Contains(l[1], " icrc=BAD (have 0x") {
		t.Errorf("corrupted frame: %s", l[1])
	}
	if d.stats.ICRCBad != 1 || d.stats.order[1].ICRCBad != 1 || d.stats.order[0].ICRCBad != 0 {
		t.Errorf("ICRC bad counted %d", d.stats.ICRCBad)
	}
	if !strings.Contains(out, "ICRC bad 1") {
		t.Errorf("summary does not count it:\n%s", out)
	}
}

// TestMalformed feeds broken RoCE frames: each prints one MALFORMED line
// with bth's error, and the tool goes on to the next frame.
func TestMalformed(t *testing.T) {
	good := roceFrames(t, "ib_write_lat.pcap")[0] // WRITE Only, 64 bytes
	const bthAt = bth.EthernetLen + bth.IPv4MinLen + bth.UDPLen
	edit := func(fn func(b []byte) []byte) []byte { return fn(slices.Clone(good)) }
	cases := []struct {
		frame []byte
		want  string
	}{
		{edit(func(b []byte) []byte { b[bthAt] = 0xff; return b }), "MALFORMED bth: unknown opcode: 0xff"},
		{edit(func(b []byte) []byte { b[bthAt+1] |= 1; return b }), "MALFORMED bth: bad transport header version: TVer 1"},
		{edit(func(b []byte) []byte { return b[:len(b)-10] }), "MALFORMED ipv4: truncated packet: total length 124, 114 bytes present"},
		{edit(func(b []byte) []byte { return b[:bthAt+6] }), "MALFORMED ipv4: truncated packet: total length 124, 34 bytes present"},
		{edit(func(b []byte) []byte { b[bthAt] = byte(bth.RCAcknowledge); return b }), "MALFORMED bth: bad length: RC_ACKNOWLEDGE carries no payload, found 76 bytes and pad 0"},
		{edit(func(b []byte) []byte { b[bthAt+1] |= 0x30; return b }), ""}, // pad 3 of 64 bytes: decodes, ICRC bad
		{edit(func(b []byte) []byte { b[bth.EthernetLen+10] ^= 1; return b }), "MALFORMED ipv4: bad IP header: header checksum"},
	}
	c := newCapture(t)
	for _, tc := range cases {
		c.add(t, tc.frame)
	}
	tcp := edit(func(b []byte) []byte { b[bth.EthernetLen+9] = 6; return b }) // TCP: not RoCE, skipped
	c.add(t, tcp)
	c.add(t, good)
	out, d := dumpBytes(t, c.buf.Bytes(), options{stats: true})
	l := lines(out)
	for i, tc := range cases {
		if !strings.Contains(l[i], "10.77.0.11 → 10.77.0.12") {
			t.Errorf("case %d: no addresses: %s", i, l[i])
		}
		if tc.want == "" {
			if strings.Contains(l[i], "MALFORMED") || !strings.Contains(l[i], "icrc=BAD") {
				t.Errorf("case %d: %s", i, l[i])
			}
			continue
		}
		if !strings.Contains(l[i], tc.want) {
			t.Errorf("case %d:\n got %s\nwant %s", i, l[i], tc.want)
		}
	}
	if !strings.Contains(l[len(cases)], "RC_RDMA_WRITE_ONLY") || !strings.HasSuffix(l[len(cases)], "icrc=ok") {
		t.Errorf("good frame after the bad ones: %s", l[len(cases)])
	}
	if d.stats.Malformed != len(cases)-1 || d.stats.Other != 1 {
		t.Errorf("malformed %d, other %d", d.stats.Malformed, d.stats.Other)
	}
}

func TestFilters(t *testing.T) {
	for _, c := range []struct {
		file string
		opt  options
		n    int
	}{
		// The pair is learnt in a first pass: both directions, all of it.
		{"host_writelat_client", options{qp: 0x1e, hasQP: true}, 82},
		{"host_writelat_client", options{qp: 0xabc, hasQP: true}, 82},
		{"host_writelat_client", options{qp: 0x99, hasQP: true}, 0},
		{"rping", options{qp: 0x1b, hasQP: true}, 60},
		{"rping", options{qp: 1, hasQP: true}, 5},
		{"ib_write_lat_rdmacm", options{qp: 0x1d, hasQP: true}, 80},
		{"ib_write_bw", options{classes: classWrite}, 80},
		{"ib_write_bw", options{classes: classAck}, 20},
		{"rping", options{classes: classUD}, 5},
		{"rping", options{classes: classRead}, 10},
		{"rping", options{classes: classSend}, 25},
		{"rping", options{classes: classSend | classWrite}, 30},
		{"ib_atomic_lat", options{classes: classAtomic}, 40},
		{"ib_atomic_lat", options{classes: classAck}, 20},
		{"ib_write_lat", options{classes: classCNP}, 0},
		{"rping", options{qp: 0x1b, hasQP: true, classes: classAck}, 25},
	} {
		out, _ := dumpFile(t, filepath.Join(captureDir, c.file+".pcap"), c.opt)
		n := 0
		if out != "" {
			n = len(lines(out))
		}
		if n != c.n {
			t.Errorf("%s %+v: %d packets, want %d", c.file, c.opt, n, c.n)
		}
	}
	if _, err := parseClasses("write,bogus"); err == nil {
		t.Error("bad class accepted")
	}
	if c, err := parseClasses("send, ack"); err != nil || c != classSend|classAck {
		t.Errorf("parseClasses: %v %v", c, err)
	}
}

// TestPeersLive checks that, without the first pass, the reverse direction
// shows from the first response on.
func TestPeersLive(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(captureDir, "host_writelat_client.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	d := newDumper(&out, options{qp: 0xabc, hasQP: true})
	src, err := openCapture("capture", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.run(src); err != nil {
		t.Fatal(err)
	}
	d.finish()
	l := lines(out.String())
	// The probe to 0x1e comes before any response: not shown.
	if len(l) != 81 || !strings.Contains(l[0], "qp=0xabc") {
		t.Errorf("%d lines, first %s", len(l), l[0])
	}
}

func TestRun(t *testing.T) {
	path := filepath.Join(captureDir, "ib_write_lat.pcap")
	var out bytes.Buffer
	if err := run([]string{"-r", path, "--stats", "-q"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "frames 235, RoCE 206, other 29") {
		t.Errorf("summary:\n%s", out.String())
	}

	// -r with -w and a filter writes a filtered copy.
	w := filepath.Join(t.TempDir(), "acks.pcap")
	out.Reset()
	if err := run([]string{"-r", path, "-w", w, "--class", "ack", "-c", "10"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if n := len(lines(out.String())); n != 10 {
		t.Errorf("-c 10 printed %d lines", n)
	}
	got, d := dumpFile(t, w, options{})
	if d.stats.RoCE != 10 || strings.Count(got, "RC_ACKNOWLEDGE") != 10 {
		t.Errorf("filtered copy:\n%s", got)
	}

	for _, args := range [][]string{
		{},
		{"-r", path, "-i", "lo"},
		{"-r", path, "--qp", "0x1000000"},
		{"-r", path, "--class", "nope"},
		{"-r", path, "extra"},
		{"-r", filepath.Join(t.TempDir(), "missing.pcap")},
	} {
		if err := run(args, io.Discard, io.Discard); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

// TestNoAllocs checks the per-packet path, text and JSON, with filters and
// statistics on: nothing allocates once the flows exist.
func TestNoAllocs(t *testing.T) {
	frames := roceFrames(t, "host_writelat_client.pcap")
	for _, opt := range []options{
		{stats: true},
		{stats: true, json: true},
		{qp: 0x1e, hasQP: true, classes: classWrite | classAck, stats: true},
	} {
		d := newDumper(io.Discard, opt)
		d.link = layers.LinkTypeEthernet
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(1, 0)}
		pass := func() {
			for _, b := range frames {
				if err := d.handle(b, ci); err != nil {
					t.Fatal(err)
				}
			}
		}
		pass()
		if a := testing.AllocsPerRun(5, pass); a != 0 {
			t.Errorf("%+v: %v allocations per pass over %d frames", opt, a, len(frames))
		}
	}
}

func BenchmarkHandle(b *testing.B) {
	frames := roceFrames(b, "ib_write_lat.pcap")
	d := newDumper(io.Discard, options{stats: true})
	d.out = bufio.NewWriter(io.Discard)
	d.link = layers.LinkTypeEthernet
	ci := gopacket.CaptureInfo{Timestamp: time.Unix(1, 0)}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := d.handle(frames[i], ci); err != nil {
			b.Fatal(err)
		}
		if i++; i == len(frames) {
			i = 0
		}
	}
}
