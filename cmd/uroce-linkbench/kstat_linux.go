package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/uroce/uroce/internal/netns"
)

// kstats are the kernel's drop counters that tell where a blast lost
// packets: the per-CPU input backlog (softnet_stat, host-wide: veth hands
// frames to the peer through it) and the receiving namespace's UDP socket
// queue (/proc/net/snmp RcvbufErrors).
type kstats struct {
	backlogDrops uint64
	udpRcvbuf    uint64
	udpIn        uint64
}

func readKstats(v netns.Veth) kstats {
	var k kstats
	if f, err := os.Open("/proc/net/softnet_stat"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if fs := strings.Fields(sc.Text()); len(fs) > 1 {
				n, _ := strconv.ParseUint(fs[1], 16, 64)
				k.backlogDrops += n
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
					k.udpRcvbuf = n
				case "InDatagrams":
					k.udpIn = n
				}
			}
		}
		return nil
	})
	return k
}

func (k kstats) sub(o kstats) kstats {
	return kstats{k.backlogDrops - o.backlogDrops, k.udpRcvbuf - o.udpRcvbuf, k.udpIn - o.udpIn}
}

func (k kstats) String() string {
	return fmt.Sprintf("kernel: backlog drops %d, receiver UDP in %d, UDP rcvbuf drops %d", k.backlogDrops, k.udpIn, k.udpRcvbuf)
}
