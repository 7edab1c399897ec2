// Package pcapfile reads and writes classic pcap files with the standard
// library only, so that packages which must not depend on gopacket (bth)
// can run golden tests over the reference captures. Tools use gopacket's
// pcapgo instead.
package pcapfile
