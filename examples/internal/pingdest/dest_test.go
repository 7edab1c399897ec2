package pingdest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/uroce/uroce/internal/pcapfile"
)

// tcpPayloads returns the TCP payloads of an Ethernet/IPv4 capture to or
// from port, in capture order.
func tcpPayloads(t testing.TB, name string, port uint16) [][]byte {
	t.Helper()
	f, err := pcapfile.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, r := range f.Records {
		b := r.Data
		if len(b) < 14+20 || binary.BigEndian.Uint16(b[12:]) != 0x0800 || b[14+9] != 6 {
			continue
		}
		ip := b[14:]
		ihl := int(ip[0]&0xf) * 4
		tcp := ip[ihl:binary.BigEndian.Uint16(ip[2:])]
		if binary.BigEndian.Uint16(tcp[0:]) != port && binary.BigEndian.Uint16(tcp[2:]) != port {
			continue
		}
		if p := tcp[int(tcp[12]>>4)*4:]; len(p) > 0 {
			out = append(out, p)
		}
	}
	return out
}

// Both programs' exchanges as the lab captured them between two rxe
// guests: the client's message, the server's, then "done".
var captures = []struct {
	file string
	want [2]Dest
	line string // want[0].String()
}{
	{"ibv_rc_pingpong.pcap", [2]Dest{
		{QPN: 0x19, PSN: 0x6efaca, GID: netip.MustParseAddr("::ffff:10.77.0.12")},
		{QPN: 0x19, PSN: 0xa69686, GID: netip.MustParseAddr("::ffff:10.77.0.11")},
	}, "LID 0x0000, QPN 0x000019, PSN 0x6efaca, GID ::ffff:10.77.0.12"},
	{"ibv_ud_pingpong.pcap", [2]Dest{
		{QPN: 0x1a, PSN: 0x3e1c8e, GID: netip.MustParseAddr("::ffff:10.77.0.12")},
		{QPN: 0x1a, PSN: 0x7edf34, GID: netip.MustParseAddr("::ffff:10.77.0.11")},
	}, "LID 0x0000, QPN 0x00001a, PSN 0x3e1c8e, GID ::ffff:10.77.0.12"},
}

const captureDir = "../../../testdata/rxe-captures/"

// TestExchangeCapture checks the message format against rxe's own: each
// capture's two address messages and "done" parse to what the guests
// printed and marshal back byte for byte.
func TestExchangeCapture(t *testing.T) {
	for _, c := range captures {
		t.Run(c.file, func(t *testing.T) {
			msgs := tcpPayloads(t, captureDir+c.file, 18515)
			if len(msgs) != 3 {
				t.Fatalf("%d TCP payloads on port 18515, want 3 (client, server, done)", len(msgs))
			}
			for i, w := range c.want {
				if len(msgs[i]) != MsgSize {
					t.Fatalf("message %d is %d bytes, want %d", i, len(msgs[i]), MsgSize)
				}
				d, err := Parse(msgs[i])
				if err != nil {
					t.Fatal(err)
				}
				if d != w {
					t.Errorf("message %d: %+v, want %+v", i, d, w)
				}
				if m := d.Marshal(); !bytes.Equal(m[:], msgs[i]) {
					t.Errorf("message %d marshals to %q, want %q", i, m, msgs[i])
				}
			}
			if !bytes.Equal(msgs[2], Done) {
				t.Errorf("last message %q, want %q", msgs[2], Done)
			}
			if got := c.want[0].String(); got != c.line {
				t.Errorf("String() = %q, want %q", got, c.line)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	good := Dest{QPN: 0x11, PSN: 0x123456, GID: netip.MustParseAddr("::ffff:10.0.0.1")}.Marshal()
	if _, err := Parse(good[:]); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{
		"",
		"0000:000011:123456",
		"0000:000011:123456:00000000000000000000ffff0a00000",    // 31 digits
		"0000:000011:123456:00000000000000000000ffff0a0000011",  // 33 digits
		"0000:000011:123456:00000000000000000000ffff0a00000g",   // not hex
		"0000:1000000:123456:00000000000000000000ffff0a000001",  // QPN over 24 bits
		"10000:000011:123456:00000000000000000000ffff0a000001",  // LID over 16 bits
		"0000:000011:123456:00000000000000000000ffff0a000001:x", // extra field
	} {
		if _, err := Parse([]byte(m)); !errors.Is(err, ErrMessage) {
			t.Errorf("Parse(%q) = %v, want %v", m, err, ErrMessage)
		}
	}
	// Every truncation of a good message fails cleanly.
	for n := range MsgSize - 1 {
		if _, err := Parse(good[:n]); err == nil {
			t.Errorf("Parse of %d bytes succeeded", n)
		}
	}
	// A program without -g sends a zero GID: it parses, as "::".
	d, err := Parse([]byte("0000:000011:123456:00000000000000000000000000000000\x00"))
	if err != nil || d.GID != netip.IPv6Unspecified() {
		t.Errorf("zero GID: %+v, %v", d, err)
	}
}

// TestExchangeOrder runs both halves of the exchange over a pipe: the
// server connects after reading the client's message and before
// answering, and the client's "done" comes last.
func TestExchangeOrder(t *testing.T) {
	cs, ss := net.Pipe()
	defer cs.Close()
	defer ss.Close()
	cli := Dest{QPN: 0x11, PSN: 0xabcdef, GID: netip.MustParseAddr("::ffff:127.0.0.2")}
	srv := Dest{QPN: 0x22, PSN: 0x000001, GID: netip.MustParseAddr("::ffff:127.0.0.1")}
	var connected Dest
	errc := make(chan error, 1)
	var gotCli Dest
	go func() {
		var err error
		gotCli, err = Server(ss, srv, func(r Dest) error { connected = r; return nil })
		errc <- err
	}()
	gotSrv, err := Client(cs, cli)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if gotSrv != srv || gotCli != cli || connected != cli {
		t.Errorf("client got %+v, server got %+v and connected to %+v", gotSrv, gotCli, connected)
	}
}

// FuzzParse: any bytes from the peer parse or fail cleanly, and what
// parses marshals back to a message that parses the same.
func FuzzParse(f *testing.F) {
	for _, c := range captures {
		for _, m := range tcpPayloads(f, captureDir+c.file, 18515) {
			f.Add(m)
		}
	}
	f.Add([]byte("0000:000011:123456:00000000000000000000ffff0a00000"))
	f.Fuzz(func(t *testing.T, m []byte) {
		d, err := Parse(m)
		if err != nil {
			return
		}
		b := d.Marshal()
		d2, err := Parse(b[:])
		if err != nil || d2 != d {
			t.Fatalf("%+v marshals to %q, which parses to %+v, %v", d, b, d2, err)
		}
	})
}
