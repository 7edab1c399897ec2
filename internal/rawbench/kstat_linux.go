package rawbench

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/uroce/uroce/internal/netns"
)

// KStats are the kernel's drop counters that tell where a blast lost
// packets: the per-CPU input backlog (softnet_stat, host-wide: veth hands
// frames to the peer through it) and the receiving namespace's UDP socket
// queue (/proc/net/snmp RcvbufErrors).
type KStats struct {
	BacklogDrops uint64
	UDPRcvbuf    uint64
	UDPIn        uint64
}

// ReadKStats reads the host-wide backlog drops and the UDP counters of
// v's namespace.
func ReadKStats(v netns.Veth) KStats {
	var k KStats
	if f, err := os.Open("/proc/net/softnet_stat"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if fs := strings.Fields(sc.Text()); len(fs) > 1 {
				n, _ := strconv.ParseUint(fs[1], 16, 64)
				k.BacklogDrops += n
			}
		}
		f.Close()
	}
	v.NS.Do(func() error {
		// thread-self: the namespace of this (locked) thread, not of
		// the process's main thread.
		b, err := os.ReadFile("/proc/thread-self/net/snmp")
		if err != nil {
			return err
		}
		var names []string
		for _, line := range strings.Split(string(b), "\n") {
			fs := strings.Fields(line)
			if len(fs) == 0 || fs[0] != "Udp:" {
				continue
			}
			if names == nil {
				names = fs
				continue
			}
			for i, x := range fs {
				n, _ := strconv.ParseUint(x, 10, 64)
				switch names[i] {
				case "RcvbufErrors":
					k.UDPRcvbuf = n
				case "InDatagrams":
					k.UDPIn = n
				}
			}
		}
		return nil
	})
	return k
}

// Sub returns the counts since o.
func (k KStats) Sub(o KStats) KStats {
	return KStats{k.BacklogDrops - o.BacklogDrops, k.UDPRcvbuf - o.UDPRcvbuf, k.UDPIn - o.UDPIn}
}

func (k KStats) String() string {
	return fmt.Sprintf("kernel: backlog drops %d, receiver UDP in %d, UDP rcvbuf drops %d", k.BacklogDrops, k.UDPIn, k.UDPRcvbuf)
}
