package main

import (
	"flag"
	"fmt"
	"strings"
)

// perftestOpt is one of perftest's options that uroce-perf knows by name
// but does not implement: the command line is refused with the option's
// name and what it does in perftest, never with the flag package's "flag
// provided but not defined".
type perftestOpt struct {
	short string // getopt letter, or ""
	long  string // getopt_long name, or ""
	arg   bool   // takes a value (has_arg)
	what  string // "perftest's <what>": its --help, shortened
}

// perftestOnly is every option of perftest 4.5's and 25.x's long_options
// and getopt string that uroce-perf does not implement. The options it
// does implement are registered in parseArgs.
var perftestOnly = []perftestOpt{
	{"B", "source_mac", true, "raw Ethernet source MAC"},
	{"C", "report-cycles", false, "report in CPU cycles"},
	{"E", "dest_mac", true, "raw Ethernet destination MAC"},
	{"G", "use_rss", false, "raw Ethernet RSS"},
	{"H", "report-histogrm", false, "latency histogram"},
	{"", "report-histogram", false, "latency histogram"},
	{"J", "dest_ip", true, "raw Ethernet destination IP"},
	{"K", "dest_port", true, "raw Ethernet destination port"},
	{"L", "hop_limit", true, "raw Ethernet hop limit"},
	{"M", "MGID", true, "multicast group GID"},
	{"O", "dualport", false, "dual-port mode"},
	{"P", "client", false, "raw Ethernet client side"},
	{"T", "tos", true, "rdma_cm type of service"},
	{"U", "report-unsorted", false, "unsorted latency samples"},
	{"W", "report-counters", true, "performance counter report"},
	{"X", "vector", true, "completion vector"},
	{"Y", "ethertype", true, "raw Ethernet EtherType"},
	{"Z", "server", false, "raw Ethernet server side"},
	{"g", "mcg", false, "multicast group"},
	{"j", "source_ip", true, "source IP (raw Ethernet, or the exchange)"},
	{"k", "source_port", true, "raw Ethernet source port"},
	{"l", "post_list", true, "post list of send WRs"},
	{"v", "mac_fwd", false, "raw Ethernet MAC forwarding"},
	{"w", "limit_bw", true, "bandwidth limit check"},
	{"y", "limit_msgrate", true, "message rate limit check"},
	{"z", "comm_rdma_cm", false, "rdma_cm exchange with regular QPs"},
	{"", "aes_block_size", true, "AES-XTS block size"},
	{"", "aes_xts", false, "AES-XTS encryption"},
	{"", "bind_source_ip", true, "exchange source IP"},
	{"", "burst_size", true, "rate limiter burst size"},
	{"", "congest_type", true, "hnsdv congestion control algorithm"},
	{"", "connectionless", false, "connectionless multicast server"},
	{"", "cpu_id", true, "CPU core choice"},
	{"", "cpu_util", false, "CPU utilization report"},
	{"", "cqe_poll", true, "CQEs polled per iteration"},
	{"", "credentials_path", true, "AES-XTS credentials file"},
	{"", "cuda_mem_type", true, "CUDA memory type"},
	{"", "data_enc_key_app_path", true, "AES-XTS data encryption key application"},
	{"", "data_enc_keys_number", true, "number of AES-XTS data encryption keys"},
	{"", "disable_dynamic_polling", false, "fixed CQE polling"},
	{"", "disable_pcie_relaxed", false, "PCIe relaxed ordering switch"},
	{"", "dlid", true, "destination LID"},
	{"", "dont_xchg_versions", false, "exchange without versions and MTU"},
	{"", "encrypt_on_tx", false, "AES-XTS encryption on transmit"},
	{"", "flow_label", true, "GRH flow label"},
	{"", "flows", true, "raw Ethernet flows"},
	{"", "flows_burst", true, "raw Ethernet flow bursts"},
	{"", "force-link", true, "link type override"},
	{"", "gpu_touch", true, "GPU touch mode"},
	{"", "ipv6", false, "IPv6 GID choice"},
	{"", "ipv6-addr", false, "IPv6 exchange address"},
	{"", "kek_path", true, "AES-XTS key encryption key file"},
	{"", "latency_gap", true, "latency gap"},
	{"", "local_ip", true, "raw Ethernet local IP"},
	{"", "local_mac", true, "raw Ethernet local MAC"},
	{"", "local_port", true, "raw Ethernet local port"},
	{"", "log_active_dci_streams", true, "active DCI streams"},
	{"", "log_dci_streams", true, "DC initiator streams"},
	{"", "mmap", true, "mmap'd file buffer"},
	{"", "mmap-offset", true, "mmap'd file offset"},
	{"", "mr_per_qp", false, "memory region per QP"},
	{"", "no_ddp", false, "out-of-order WR consumption switch"},
	{"", "no_enhanced_reorder", false, "out-of-order WR consumption switch"},
	{"", "no_lock", false, "lock-free I/O"},
	{"", "odp", false, "on-demand paging"},
	{"", "opencl_platform_id", true, "OpenCL platform"},
	{"", "output", true, "one-number output"},
	{"", "payload_file_path", true, "payload file"},
	{"", "perform_warm_up", false, "warm-up"},
	{"", "ph", true, "TPH processing hints"},
	{"", "pkey_index", true, "P_Key index"},
	{"", "promiscuous", false, "raw Ethernet promiscuous mode"},
	{"", "rate_limit", true, "rate limit"},
	{"", "rate_limit_type", true, "rate limiter type"},
	{"", "rate_units", true, "rate limit units"},
	{"", "raw_ipv6", false, "raw Ethernet IPv6"},
	{"", "raw_mcast", false, "raw Ethernet multicast"},
	{"", "recv_post_list", true, "post list of receive WRs"},
	{"", "remote_ip", true, "raw Ethernet remote IP"},
	{"", "remote_mac", true, "raw Ethernet remote MAC"},
	{"", "remote_port", true, "raw Ethernet remote port"},
	{"", "reply_every", true, "raw Ethernet reply interval"},
	{"", "report-both", false, "separate local and remote reports"},
	{"", "report-per-port", false, "per-port report"},
	{"", "retry_count", true, "rdma_cm retry count"},
	{"", "reversed", false, "reversed direction"},
	{"", "sig_before", false, "signature before encryption"},
	{"", "sig_offload", false, "T10-DIF signature offload"},
	{"", "sniffer", false, "sniffer QP"},
	{"", "tclass", true, "GRH traffic class"},
	{"", "tcp", false, "raw Ethernet TCP headers"},
	{"", "tph_mem", true, "TPH memory type"},
	{"", "typical_pkt_size", true, "rate limiter packet size"},
	{"", "unsolicited_write", false, "unsolicited WRITE with immediate"},
	{"", "use-null-mr", false, "null memory region"},
	{"", "use-srq", false, "shared receive queue"},
	{"", "use_cuda", true, "CUDA device memory"},
	{"", "use_cuda_bus_id", true, "CUDA device by PCIe address"},
	{"", "use_cuda_dmabuf", false, "CUDA DMA-BUF"},
	{"", "use_cuda_pcie_mapping", false, "CUDA DMA-BUF through PCIe BAR1"},
	{"", "use_data_direct", false, "Data-Direct CUDA DMA-BUF"},
	{"", "use_hl", true, "Habana Labs device memory"},
	{"", "use_hugepages", false, "huge pages"},
	{"", "use_mlu", true, "MLU device memory"},
	{"", "use_mlu_dmabuf", false, "MLU DMA-BUF"},
	{"", "use_neuron", true, "Neuron core memory"},
	{"", "use_neuron_dmabuf", false, "Neuron DMA-BUF"},
	{"", "use_ooo", false, "out-of-order data placement"},
	{"", "use_opencl", true, "OpenCL device memory"},
	{"", "use_rocm", true, "ROCm device memory"},
	{"", "use_rocm_dmabuf", false, "ROCm DMA-BUF"},
	{"", "vlan_en", false, "raw Ethernet VLAN tag"},
	{"", "vlan_pcp", true, "raw Ethernet VLAN priority"},
	{"", "wait_destroy", true, "wait before destroy"},
	{"", "write_with_imm", false, "WRITE with immediate"},
}

// refusedOpt is a perftestOnly option's flag: parsing it only records
// that it was given, and parseArgs then refuses the command line.
type refusedOpt struct {
	opt  *perftestOpt
	seen *[]string
	name string
}

func (r *refusedOpt) String() string { return "" }

func (r *refusedOpt) Set(string) error {
	*r.seen = append(*r.seen, r.name)
	return nil
}

func (r *refusedOpt) IsBoolFlag() bool { return !r.opt.arg }

// registerRefused adds perftestOnly's options to fs; each one given is
// appended to seen, as it was spelled.
func registerRefused(fs *flag.FlagSet, seen *[]string) {
	for i := range perftestOnly {
		o := &perftestOnly[i]
		if o.short != "" {
			fs.Var(&refusedOpt{opt: o, seen: seen, name: "-" + o.short}, o.short, "")
		}
		if o.long != "" {
			fs.Var(&refusedOpt{opt: o, seen: seen, name: "--" + o.long}, o.long, "")
		}
	}
}

// isRefused says whether a flag is one of perftestOnly's (not listed in
// -h).
func isRefused(f *flag.Flag) bool {
	_, ok := f.Value.(*refusedOpt)
	return ok
}

// refusedError names the first unsupported option on a command line.
func refusedError(fs *flag.FlagSet, seen []string) error {
	f := fs.Lookup(strings.TrimLeft(seen[0], "-"))
	o := f.Value.(*refusedOpt).opt
	other := ""
	if o.short != "" && o.long != "" {
		other = ", -" + o.short
		if strings.HasPrefix(seen[0], "-"+o.short) && len(seen[0]) == 2 {
			other = ", --" + o.long
		}
	}
	return &unsupportedError{fmt.Sprintf("%s (perftest's %s%s) is not supported", seen[0], o.what, other)}
}

// unsupportedError is a command line that uses a perftest option
// uroce-perf does not implement: exit status 2, as ErrUsage, but said
// without "usage:".
type unsupportedError struct{ msg string }

func (e *unsupportedError) Error() string { return e.msg }
func (e *unsupportedError) Unwrap() error { return ErrUsage }
