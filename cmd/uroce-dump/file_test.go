package main

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// ngCapture returns a pcapng file holding frames, and the offset where
// each frame's block starts.
func ngCapture(t *testing.T, frames [][]byte) ([]byte, []int) {
	t.Helper()
	var buf bytes.Buffer
	w, err := pcapgo.NewNgWriter(&buf, layers.LinkTypeEthernet)
	if err != nil {
		t.Fatal(err)
	}
	var at []int
	ts := time.Unix(1700000000, 0)
	for _, f := range frames {
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		at = append(at, buf.Len())
		ts = ts.Add(time.Millisecond)
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(f), Length: len(f), InterfaceIndex: 0}, f); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), at
}

// TestCaptureFiles reads files that are empty, not captures, or cut short
// anywhere: each error names the file and says what is wrong, and a
// whole file reads to its end without one.
func TestCaptureFiles(t *testing.T) {
	pcap, err := os.ReadFile(filepath.Join(captureDir, "ib_write_lat.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	const pcapHeader, recordHeader = 24, 16
	first := pcapHeader + recordHeader + int(binary.LittleEndian.Uint32(pcap[pcapHeader+8:])) // end of packet 1
	frames := roceFrames(t, "ib_write_lat.pcap")[:3]
	ng, at := ngCapture(t, frames)
	shbOnly := ng[:binary.LittleEndian.Uint32(ng[4:])]

	cases := []struct {
		name    string
		file    []byte
		packets int    // with want "": the RoCE packets read
		want    string // the error, after "FILE: "
	}{
		{"whole pcap", pcap, 206, ""},
		{"whole pcapng", ng, 3, ""},
		{"empty", nil, 0, "empty file"},
		{"text", []byte("ru # this is not a capture\n"), 0, "not a pcap or pcapng file"},
		{"short text", []byte("ru"), 0, "not a pcap or pcapng file"},
		{"html", []byte("<html><body>404</body></html>\n"), 0, "not a pcap or pcapng file"},
		{"pcap magic cut", pcap[:2], 0, "truncated pcap: in the file header"},
		{"pcap header cut", pcap[:10], 0, "truncated pcap: in the file header"},
		{"pcap header only", pcap[:pcapHeader], 0, ""},
		{"record header cut", pcap[:pcapHeader+5], 0, "truncated pcap: cut short before the first packet"},
		{"record data cut", pcap[:pcapHeader+recordHeader+30], 0, "truncated pcap: cut short before the first packet"},
		{"record 2 header cut", pcap[:first+recordHeader-1], 0, "truncated pcap: cut short after packet 1"},
		{"record 2 data empty", pcap[:first+recordHeader], 0, "truncated pcap: cut short after packet 1"},
		{"pcapng magic cut", ng[:3], 0, "truncated pcapng: in the file header"},
		{"pcapng section cut", ng[:10], 0, "truncated pcapng: in the file header"},
		{"pcapng section only", shbOnly, 0, "pcapng without an interface description block"},
		{"pcapng interface cut", ng[:len(shbOnly)+6], 0, "truncated pcapng: in the file header"},
		{"pcapng block header cut", ng[:at[1]+5], 0, "truncated pcapng: cut short after packet 1"},
		{"pcapng packet cut", ng[:at[1]+40], 0, "truncated pcapng: cut short after packet 1"},
		{"pcapng trailer cut", ng[:at[2]-2], 0, "truncated pcapng: cut short after packet 1"},
		{"pcapng no packets", ng[:at[0]], 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "in.cap")
			if err := os.WriteFile(path, tc.file, 0o644); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			err := run([]string{"-r", path, "-q", "--json", "--stats"}, &out, io.Discard)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if want := `"roce":` + strconv.Itoa(tc.packets) + ","; !strings.Contains(out.String(), want) {
					t.Errorf("summary has no %s:\n%s", want, out.String())
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if want := path + ": " + tc.want; err.Error() != want {
				t.Errorf("error %q\nwant %q", err, want)
			}
		})
	}
}
