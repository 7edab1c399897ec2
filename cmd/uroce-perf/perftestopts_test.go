package main

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// perftestOptions is every option perftest 4.5 and 25.x take: the
// getopt string's letters and the long_options names (with has_arg),
// taken from their perftest_parameters.c, and --help's spelling of
// --report-histogrm.
var perftestOptions = []struct {
	name string
	arg  bool
}{
	{"-w", true}, {"-y", true}, {"-p", true}, {"-d", true}, {"-i", true}, {"-m", true},
	{"-s", true}, {"-n", true}, {"-t", true}, {"-u", true}, {"-S", true}, {"-x", true},
	{"-c", true}, {"-q", true}, {"-I", true}, {"-o", true}, {"-M", true}, {"-r", true},
	{"-Q", true}, {"-A", true}, {"-l", true}, {"-D", true}, {"-f", true}, {"-B", true},
	{"-T", true}, {"-L", true}, {"-E", true}, {"-J", true}, {"-j", true}, {"-K", true},
	{"-k", true}, {"-X", true}, {"-W", true}, {"-a", false}, {"-F", false}, {"-e", false},
	{"-g", false}, {"-z", false}, {"-R", false}, {"-v", false}, {"-h", false}, {"-b", false},
	{"-N", false}, {"-V", false}, {"-C", false}, {"-H", false}, {"-U", false}, {"-O", false},
	{"-Z", false}, {"-P", false}, {"--aes_block_size", true}, {"--aes_xts", false},
	{"--all", false}, {"--atomic_type", true}, {"--bidirectional", false},
	{"--bind_source_ip", true}, {"--burst_size", true}, {"--client", false},
	{"--comm_rdma_cm", false}, {"--congest_type", true}, {"--connection", true},
	{"--connectionless", false}, {"--CPU-freq", false}, {"--cpu_id", true},
	{"--cpu_util", false}, {"--cq-mod", true}, {"--cqe_poll", true},
	{"--credentials_path", true}, {"--cuda_mem_type", true},
	{"--data_enc_key_app_path", true}, {"--data_enc_keys_number", true}, {"--dest_ip", true},
	{"--dest_mac", true}, {"--dest_port", true}, {"--disable_dynamic_polling", false},
	{"--disable_pcie_relaxed", false}, {"--dlid", true}, {"--dont_xchg_versions", false},
	{"--dualport", false}, {"--duration", true}, {"--encrypt_on_tx", false},
	{"--ethertype", true}, {"--events", false}, {"--flow_label", true}, {"--flows", true},
	{"--flows_burst", true}, {"--force-link", true}, {"--gid-index", true},
	{"--gpu_touch", true}, {"--help", false}, {"--hop_limit", true}, {"--ib-dev", true},
	{"--ib-port", true}, {"--inline_size", true}, {"--ipv6", false}, {"--ipv6-addr", false},
	{"--iters", true}, {"--kek_path", true}, {"--latency_gap", true}, {"--limit_bw", true},
	{"--limit_msgrate", true}, {"--local_ip", true}, {"--local_mac", true},
	{"--local_port", true}, {"--log_active_dci_streams", true}, {"--log_dci_streams", true},
	{"--mac_fwd", false}, {"--margin", true}, {"--mcg", false}, {"--MGID", true},
	{"--mmap", true}, {"--mmap-offset", true}, {"--mr_per_qp", false}, {"--mtu", true},
	{"--no_ddp", false}, {"--no_enhanced_reorder", false}, {"--no_lock", false},
	{"--noPeak", false}, {"--odp", false}, {"--opencl_platform_id", true},
	{"--out_json", false}, {"--out_json_file", true}, {"--output", true}, {"--outs", true},
	{"--payload_file_path", true}, {"--perform_warm_up", false}, {"--ph", true},
	{"--pkey_index", true}, {"--port", true}, {"--post_list", true},
	{"--promiscuous", false}, {"--qp", true}, {"--qp-timeout", true}, {"--rate_limit", true},
	{"--rate_limit_type", true}, {"--rate_units", true}, {"--raw_ipv6", false},
	{"--raw_mcast", false}, {"--rdma_cm", false}, {"--recv_post_list", true},
	{"--remote_ip", true}, {"--remote_mac", true}, {"--remote_port", true},
	{"--reply_every", true}, {"--report-both", false}, {"--report-counters", true},
	{"--report-cycles", false}, {"--report-histogrm", false}, {"--report-per-port", false},
	{"--report-unsorted", false}, {"--report_gbits", false}, {"--retry_count", true},
	{"--reversed", false}, {"--run_infinitely", false}, {"--rx-depth", true},
	{"--server", false}, {"--sig_before", false}, {"--sig_offload", false}, {"--size", true},
	{"--sl", true}, {"--sniffer", false}, {"--source_ip", true}, {"--source_mac", true},
	{"--source_port", true}, {"--tclass", true}, {"--tcp", false}, {"--tos", true},
	{"--tph_mem", true}, {"--tx-depth", true}, {"--typical_pkt_size", true},
	{"--unsolicited_write", false}, {"--use-null-mr", false}, {"--use-srq", false},
	{"--use_cuda", true}, {"--use_cuda_bus_id", true}, {"--use_cuda_dmabuf", false},
	{"--use_cuda_pcie_mapping", false}, {"--use_data_direct", false}, {"--use_hl", true},
	{"--use_hugepages", false}, {"--use_mlu", true}, {"--use_mlu_dmabuf", false},
	{"--use_neuron", true}, {"--use_neuron_dmabuf", false}, {"--use_old_post_send", false},
	{"--use_ooo", false}, {"--use_opencl", true}, {"--use_rocm", true},
	{"--use_rocm_dmabuf", false}, {"--use_rss", false}, {"--vector", true},
	{"--version", false}, {"--vlan_en", false}, {"--vlan_pcp", true},
	{"--wait_destroy", true}, {"--write_with_imm", false},
	{"--report-histogram", false},
}

// perftestSupported are the options uroce-perf implements, each with a
// value that some test accepts.
var perftestSupported = map[string]string{
	"-p": "18515", "-d": "eth0", "-i": "1", "-m": "1024", "-s": "8", "-n": "100", "-t": "16",
	"-u": "14", "-S": "0", "-x": "0", "-c": "RC", "-q": "1", "-I": "0", "-o": "16", "-r": "64",
	"-Q": "10", "-A": "CMP_AND_SWAP", "-D": "5", "-f": "1", "-a": "", "-F": "", "-e": "",
	"-R": "", "-h": "", "-b": "", "-N": "", "-V": "",
	"--all": "", "--atomic_type": "CMP_AND_SWAP", "--bidirectional": "", "--connection": "UD",
	"--CPU-freq": "", "--cq-mod": "10", "--duration": "5", "--events": "", "--gid-index": "0",
	"--help": "", "--ib-dev": "eth0", "--ib-port": "1", "--inline_size": "0", "--iters": "100",
	"--margin": "1", "--mtu": "1024", "--noPeak": "", "--out_json": "", "--out_json_file": "x.json",
	"--outs": "16", "--port": "18515", "--qp": "1", "--qp-timeout": "14", "--rdma_cm": "",
	"--report_gbits": "", "--run_infinitely": "", "--rx-depth": "64", "--size": "8", "--sl": "0",
	"--tx-depth": "16", "--use_old_post_send": "", "--version": "",
}

// TestPerftestOptions walks perftest's whole option list: each option
// either works in some test or is refused, in every test, as
// "uroce-perf: OPTION (perftest's ...) is not supported", never with the
// flag package's "flag provided but not defined".
func TestPerftestOptions(t *testing.T) {
	for _, o := range perftestOptions {
		args := []string{o.name}
		if o.arg {
			args = append(args, "1")
		}
		if v, ok := perftestSupported[o.name]; ok {
			if v != "" {
				args[1] = v
			}
			worked := false
			for _, k := range kinds {
				_, err := parseArgs(k, args, io.Discard)
				// uroce's latency tests count iterations only.
				partial := (o.name == "-D" || o.name == "--duration") && !k.bw
				if err != nil && (strings.Contains(err.Error(), "not defined") || strings.Contains(err.Error(), "not supported") != partial) {
					t.Errorf("%s %q: %v", k.name, args, err)
				}
				worked = worked || err == nil || errors.Is(err, errHelp)
			}
			if !worked {
				t.Errorf("%q works in no test", args)
			}
			continue
		}
		for _, k := range kinds {
			var so, se bytes.Buffer
			code := mainCode(append([]string{k.name}, args...), &so, &se)
			want := "uroce-perf: " + o.name + " (perftest's "
			if code != 2 || !strings.HasPrefix(se.String(), want) || !strings.HasSuffix(se.String(), " is not supported\n") || so.Len() != 0 {
				t.Errorf("%s %q: exit %d, stderr %q, want %q... is not supported", k.name, args, code, se.String(), want)
			}
		}
	}
	// A flag perftest does not have is still Go's error.
	if _, err := parseArgs(kinds[0], []string{"--zz"}, io.Discard); err == nil || !strings.Contains(err.Error(), "flag provided but not defined: -zz") {
		t.Errorf("--zz: %v", err)
	}
	// -h lists the options that work, not the refused ones.
	var h bytes.Buffer
	parseArgs(kinds[0], []string{"-h"}, &h)
	if strings.Contains(h.String(), "post_list") || !strings.Contains(h.String(), "refused by name") {
		t.Errorf("help:\n%s", h.String())
	}
}

// TestPerftestOptionsWork checks what the small options do: -V prints the
// version, -N zeroes the peak, -o sets the offered depth, -i and -S take
// perftest's defaults only.
func TestPerftestOptionsWork(t *testing.T) {
	var so bytes.Buffer
	if code := mainCode([]string{"write_bw", "-V"}, &so, io.Discard); code != 0 || so.String() != "Version: 6.06\n" {
		t.Errorf("-V: exit %d, %q", code, so.String())
	}
	k, _ := kindByName("read_lat")
	c, err := parseArgs(k, []string{"-o", "16"}, io.Discard)
	if err != nil || c.outReads() != 16 {
		t.Errorf("-o 16: %v", err)
	}
	if c, _ := parseArgs(k, []string{"-o", "1000"}, io.Discard); c.outReads() != 128 {
		t.Errorf("-o 1000: %d", c.outReads())
	}
	if _, err := parseArgs(kinds[0], []string{"-o", "4"}, io.Discard); err == nil {
		t.Error("-o accepted by write_lat")
	}
	for _, bad := range [][]string{{"-i", "2"}, {"-S", "3"}, {"-u", "0"}, {"-N"}} {
		if _, err := parseArgs(kinds[0], bad, io.Discard); err == nil {
			t.Errorf("%q accepted by write_lat", bad)
		}
	}
	so2, co, _ := runPair(t, "read_bw", "-s", "4096", "-n", "200", "-N", "-o", "4")
	if r := tableRows(t, co)[0]; r["BW peak[MB/sec]"] != 0 || r["BW average[MB/sec]"] <= 0 {
		t.Errorf("-N: %v", r)
	}
	// Both offer 4 (the client's -o), and the server prints the client's.
	if !strings.Contains(co, " local address: LID 0000 QPN") || strings.Count(co+so2, " OUT 0x0004 ") != 4 {
		t.Errorf("-o 4:\n%s\n%s", co, so2)
	}
}
