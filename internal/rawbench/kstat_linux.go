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
	if st, err := v.NS.UDPStats(); err == nil {
		k.UDPRcvbuf, k.UDPIn = st["RcvbufErrors"], st["InDatagrams"]
	}
	return k
}

// Sub returns the counts since o.
func (k KStats) Sub(o KStats) KStats {
	return KStats{k.BacklogDrops - o.BacklogDrops, k.UDPRcvbuf - o.UDPRcvbuf, k.UDPIn - o.UDPIn}
}

func (k KStats) String() string {
	return fmt.Sprintf("kernel: backlog drops %d, receiver UDP in %d, UDP rcvbuf drops %d", k.BacklogDrops, k.UDPIn, k.UDPRcvbuf)
}
