package perftest

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"

	"github.com/uroce/uroce/internal/perftestcap"
)

// messages plays a peer from its recorded messages, one per Read, and
// keeps each message we write.
type messages struct {
	peer  [][]byte
	wrote [][]byte
}

func (m *messages) Read(p []byte) (int, error) {
	if len(m.peer) == 0 {
		return 0, errors.New("peer has no more messages")
	}
	msg := m.peer[0]
	m.peer = m.peer[1:]
	if len(msg) != len(p) {
		return 0, fmt.Errorf("peer message of %d bytes, read of %d", len(msg), len(p))
	}
	return copy(p, msg), nil
}

func (m *messages) Write(p []byte) (int, error) {
	m.wrote = append(m.wrote, append([]byte(nil), p...))
	return len(p), nil
}

// TestReplayCMCapture runs each side of ib_write_lat -R's exchange against
// the other side's captured SENDs and checks that every message we send
// is the one perftest sent: same order, sizes and bytes. The first two
// Dest messages (around the test QP's rdma_cm connection) are all zero,
// as perftest's my_dest is before set_up_connection.
func TestReplayCMCapture(t *testing.T) {
	x, err := perftestcap.CMStreams("../../testdata/rxe-captures/ib_write_lat_rdmacm.pcap")
	if err != nil {
		t.Fatal(err)
	}
	if len(x.ClientSends) != 10 || len(x.ServerSends) != 10 {
		t.Fatalf("capture: %d client and %d server SENDs, want 10 each", len(x.ClientSends), len(x.ServerSends))
	}
	for _, side := range []struct {
		name         string
		client       bool
		mine, theirs [][]byte
	}{{"client", true, x.ClientSends, x.ServerSends}, {"server", false, x.ServerSends, x.ClientSends}} {
		rec := &messages{peer: side.theirs}
		c := NewCMConn(rec, side.client)
		sys, err := c.Hello(SysData{PageSize: 4096, CacheLine: 64, MTU: 3})
		if err != nil || c.RemoteVersion != "6.06" || sys != (SysData{4096, 64, 3}) {
			t.Fatalf("%s: hello: %+v, %q, %v", side.name, sys, c.RemoteVersion, err)
		}
		for range 2 {
			if got, err := c.HandShake(Dest{}); err != nil || got != (Dest{}) {
				t.Fatalf("%s: zero handshake got %+v, %v", side.name, got, err)
			}
		}
		me, err := ParseDestBinary(side.mine[9])
		if err != nil {
			t.Fatal(err)
		}
		peer, err := ParseDestBinary(side.theirs[9])
		if err != nil {
			t.Fatal(err)
		}
		for range 4 {
			if got, err := c.HandShake(me); err != nil || got != peer {
				t.Fatalf("%s: handshake got %+v, %v; want %+v", side.name, got, err, peer)
			}
		}
		if len(rec.wrote) != len(side.mine) {
			t.Fatalf("%s: wrote %d messages, perftest %d", side.name, len(rec.wrote), len(side.mine))
		}
		for i := range rec.wrote {
			if !bytes.Equal(rec.wrote[i], side.mine[i]) {
				t.Errorf("%s: message %d: wrote %x, perftest %x", side.name, i, rec.wrote[i], side.mine[i])
			}
		}
	}
}

func TestDestBinary(t *testing.T) {
	// The client's Dest in ib_write_lat_rdmacm.pcap.
	const capHex = "00000000000000010000001d00725802000011cf0000000000005596a291600000000000000000000000ffff0a4d000c0000000000000001"
	raw, err := hex.DecodeString(capHex)
	if err != nil {
		t.Fatal(err)
	}
	b := [DestBinaryLen]byte(raw)
	d, err := ParseDestBinary(b[:])
	if err != nil {
		t.Fatal(err)
	}
	want := Dest{OutReads: 1, QPN: 0x1d, PSN: 0x725802, RKey: 0x11cf, VAddr: 0x5596a2916000,
		GID: [16]byte{10: 0xff, 11: 0xff, 12: 0x0a, 13: 0x4d, 15: 0x0c}, GIDIndex: 1}
	if d != want {
		t.Errorf("parsed %+v\nwant   %+v", d, want)
	}
	var out [DestBinaryLen]byte
	d.PutBinary(out[:])
	if out != b {
		t.Errorf("PutBinary: %x", out)
	}
	bad := func(off int, v byte) []byte {
		c := b
		c[off] = v
		return c[:]
	}
	for _, in := range [][]byte{nil, b[:55], append(b[:], 0), bad(binQPN, 1), bad(binPSN, 1), bad(binLID, 1), bad(binOutReads, 1)} {
		if _, err := ParseDestBinary(in); !errors.Is(err, ErrProtocol) {
			t.Errorf("ParseDestBinary(%x): %v", in, err)
		}
	}
	// Close over rdma_cm is the last handshake alone: no "done".
	peer := &messages{peer: [][]byte{b[:]}}
	if err := NewCMConn(peer, true).Close(d); err != nil || len(peer.wrote) != 1 || len(peer.wrote[0]) != DestBinaryLen {
		t.Errorf("close: %v, wrote %q", err, peer.wrote)
	}
}

func FuzzParseDestBinary(f *testing.F) {
	var b [DestBinaryLen]byte
	Dest{OutReads: 1, QPN: 0x1d, PSN: 0x725802, RKey: 0x11cf, VAddr: 0x5596a2916000, GIDIndex: 1}.PutBinary(b[:])
	f.Add(b[:])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		d, err := ParseDestBinary(in)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v is not ErrProtocol", err)
			}
			return
		}
		var out [DestBinaryLen]byte
		d.PutBinary(out[:])
		// The 4 bytes of padding before vaddr are not read (perftest
		// sends whatever its stack held there).
		want := append([]byte(nil), in...)
		clear(want[binRKey+4 : binVAddr])
		if !bytes.Equal(out[:], want) {
			t.Fatalf("round trip: %x → %+v → %x", in, d, out)
		}
	})
}
