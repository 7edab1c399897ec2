package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/uroce/uroce/pkg/perftest"
	"github.com/uroce/uroce/verbs"
)

// printer prints a test as perftest does: a banner with the test's
// parameters and both sides' QP details, the table header, one line per
// size, a closing line. It keeps the reports for --out_json.
type printer struct {
	w      io.Writer
	cfg    *config
	device string
	header bool
	Lat    []perftest.LatencyReport
	BW     []perftest.BandwidthReport
	// counters are the device's, with -stats.
	counters *verbs.Counters
	err      error
}

var (
	_ reporter         = (*printer)(nil)
	_ countersReporter = (*printer)(nil)
	_ counterSource    = (*bench)(nil)
)

// Counters prints the device's counters on one line, "counters: {...}"
// as %+v prints them, the form examples/pingpong's -stats prints too.
func (p *printer) Counters(c verbs.Counters) {
	p.counters = &c
	p.printf("counters: %+v\n", c)
}

func (p *printer) printf(format string, a ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, a...)
	}
}

// Note prints one of perftest's own lines as it is.
func (p *printer) Note(msg string) { p.printf("%s", msg) }

func (p *printer) Connected(local, remote []perftest.Dest, sys perftest.SysData) {
	c := p.cfg
	p.printf("\n" + perftest.ResultLine)
	p.printf("                    %s\n", c.title())
	if c.events {
		p.printf(" Test with events. Using %s_comp0\n", p.device)
	}
	p.printf(" Dual-port       : OFF\t\tDevice         : %s\n", p.device)
	p.printf(" Number of qps   : %d\t\tTransport type : IB\n", c.qps)
	p.printf(" Connection type : %s\t\tUsing SRQ      : OFF\n", c.connName())
	if c.kind.bw || c.kind.verb == verbSend {
		p.printf(" TX depth        : %d\n", c.tx)
	}
	if c.kind.bw {
		p.printf(" CQ Moderation   : %d\n", c.cqModUsed())
	}
	p.printf(" Mtu             : %d[B]\n", sys.MTU.Bytes())
	p.printf(" Link type       : Ethernet\n")
	if c.bindUsed != "" {
		p.printf(" AF_XDP bind     : %s\n", c.bindUsed)
	}
	// uroce's own line, only when on, so a go-back-N header stays
	// perftest's.
	if c.srUsed {
		p.printf(" Selective repeat: ON\n")
	}
	p.printf(" GID index       : %d\n", c.gidIdx)
	if !c.kind.bw && c.kind.verb != verbRead && c.kind.verb != verbAtomic {
		p.printf(" Max inline data : %d[B]\n", c.inline)
	}
	if c.rdmaCM {
		p.printf(" rdma_cm QPs\t : ON\n Data ex. method : rdma_cm\n")
	} else {
		p.printf(" rdma_cm QPs\t : OFF\n Data ex. method : Ethernet\n")
	}
	p.printf(perftest.ResultLine)
	for i := range local {
		p.dest("local", local[i])
	}
	for i := range remote {
		p.dest("remote", remote[i])
	}
}

// dest prints one side's QP as perftest's ctx_print_pingpong_data does.
func (p *printer) dest(side string, d perftest.Dest) {
	p.printf(" %s address: LID %04x QPN %#06x PSN %#06x", side, d.LID, d.QPN, d.PSN)
	if p.cfg.kind.verb == verbRead || p.cfg.kind.verb == verbAtomic {
		p.printf(" OUT %#04x", d.OutReads)
	}
	if p.cfg.kind.verb != verbSend {
		p.printf(" RKey %#08x VAddr %#016x", d.RKey, d.VAddr)
	}
	p.printf("\n GID: ")
	for i, g := range d.GID {
		if i > 0 {
			p.printf(":")
		}
		p.printf("%02d", g)
	}
	p.printf("\n")
}

func (p *printer) Latency(r perftest.LatencyReport) {
	if !p.header {
		p.header = true
		if p.err == nil {
			p.err = r.WriteHeader(p.w)
		}
	}
	if p.err == nil {
		_, p.err = r.WriteTo(p.w)
	}
	p.Lat = append(p.Lat, r)
}

func (p *printer) Bandwidth(r perftest.BandwidthReport) {
	if !p.header {
		p.header = true
		if p.err == nil {
			p.err = r.WriteHeader(p.w)
		}
	}
	if p.err == nil {
		_, p.err = r.WriteTo(p.w)
	}
	p.BW = append(p.BW, r)
}

// finish prints the closing line and, with --out_json, the JSON file.
func (p *printer) finish() error {
	if p.header {
		p.printf(perftest.ResultLine)
	}
	if p.err != nil {
		return p.err
	}
	if !p.cfg.json {
		return nil
	}
	b, err := p.marshal()
	if err != nil {
		return err
	}
	if p.cfg.jsonTo == "-" {
		_, err = p.w.Write(b)
		return err
	}
	return os.WriteFile(p.cfg.jsonTo, b, 0o644)
}

// jsonReport is --out_json's document: perftest's "test_info" and
// "results" sections, with every size's result (perftest writes one).
type jsonReport struct {
	TestInfo struct {
		Test           string `json:"test"`
		Device         string `json:"Device"`
		NumberOfQPs    int    `json:"Number_of_qps"`
		ConnectionType string `json:"Connection_type"`
		Link           string `json:"Link"`
		Role           string `json:"Role"`
		Units          string `json:"BW_units,omitempty"`
		// SelectiveRepeat is uroce's: the QPs used selective repeat.
		SelectiveRepeat bool `json:"Selective_repeat,omitempty"`
	} `json:"test_info"`
	Results any `json:"results"`
	// Counters are uroce's own (not perftest's), with -stats.
	Counters *verbs.Counters `json:"counters,omitempty"`
}

func (p *printer) marshal() ([]byte, error) {
	var j jsonReport
	j.TestInfo.Test = p.cfg.title()
	j.Counters = p.counters
	j.TestInfo.Device = p.device
	j.TestInfo.NumberOfQPs = p.cfg.qps
	j.TestInfo.ConnectionType = p.cfg.connName()
	j.TestInfo.Link = p.cfg.link
	j.TestInfo.SelectiveRepeat = p.cfg.srUsed
	j.TestInfo.Role = "client"
	if p.cfg.peer == "" {
		j.TestInfo.Role = "server"
	}
	if p.cfg.kind.bw {
		j.TestInfo.Units = "MB/sec"
		if p.cfg.gbits {
			j.TestInfo.Units = "Gb/sec"
		}
		j.Results = p.BW
		if p.BW == nil {
			j.Results = []perftest.BandwidthReport{}
		}
	} else {
		j.Results = p.Lat
		if p.Lat == nil {
			j.Results = []perftest.LatencyReport{}
		}
	}
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("json: %w", err)
	}
	return append(b, '\n'), nil
}
