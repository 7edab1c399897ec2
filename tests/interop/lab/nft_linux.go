package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
)

// Nft loads an nftables ruleset (`nft -f -`) into the lab namespace.
// Rules go with the namespace.
func (l *Lab) Nft(ctx context.Context, ruleset string) error {
	cmd := l.NSCommand(ctx, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(ruleset)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("lab: nft -f: %w\n%s", err, out)
	}
	return nil
}

// Dropper is an nftables table on the lab's bridge that drops a share of
// the RoCEv2 packets it forwards.
type Dropper struct {
	l       *Lab
	table   string
	Percent int
}

// DropRoCE makes the bridge drop percent % of the RoCEv2 packets (UDP
// destination port 4791) it forwards between its ports, chosen at random,
// in both directions. The bridge family's forward hook sees bridged
// frames directly; the ip family would need br_netfilter.
func (l *Lab) DropRoCE(ctx context.Context, percent int) (*Dropper, error) {
	return l.dropRoCE(ctx, percent, "")
}

// DropRoCERequestsFrom is DropRoCE for the requests whose IP source is
// src only: its ACKs and every packet of the other direction pass, so
// each loss waits on src's retransmission timer alone. The BTH opcode is
// the first byte after the UDP header; 0x11 is RC ACKNOWLEDGE.
func (l *Lab) DropRoCERequestsFrom(ctx context.Context, percent int, src netip.Addr) (*Dropper, error) {
	family := "ip"
	if src.Is6() {
		family = "ip6"
	}
	return l.dropRoCE(ctx, percent, fmt.Sprintf("%s saddr %v @th,64,8 != 0x11 ", family, src))
}

func (l *Lab) dropRoCE(ctx context.Context, percent int, match string) (*Dropper, error) {
	d := &Dropper{l: l, table: "uroce_lab_drop", Percent: percent}
	err := l.Nft(ctx, fmt.Sprintf(`table bridge %s {
	chain forward {
		type filter hook forward priority 0; policy accept;
		%sudp dport 4791 numgen random mod 100 < %d counter drop
	}
}
`, d.table, match, percent))
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Dropped returns how many packets the rule has dropped so far.
func (d *Dropper) Dropped(ctx context.Context) (uint64, error) {
	out, err := d.l.NSCommand(ctx, "nft", "-j", "list", "table", "bridge", d.table).Output()
	if err != nil {
		return 0, fmt.Errorf("lab: nft list %s: %w", d.table, err)
	}
	var doc struct {
		Nftables []struct {
			Rule *struct {
				Expr []map[string]json.RawMessage `json:"expr"`
			} `json:"rule"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return 0, fmt.Errorf("lab: nft list %s: %w", d.table, err)
	}
	for _, o := range doc.Nftables {
		if o.Rule == nil {
			continue
		}
		for _, e := range o.Rule.Expr {
			if raw, ok := e["counter"]; ok {
				var c struct{ Packets uint64 }
				if err := json.Unmarshal(raw, &c); err != nil {
					return 0, fmt.Errorf("lab: nft counter: %w", err)
				}
				return c.Packets, nil
			}
		}
	}
	return 0, fmt.Errorf("lab: no counter in table %s", d.table)
}

// Remove deletes the table: the bridge forwards everything again.
func (d *Dropper) Remove(ctx context.Context) error {
	if out, err := d.l.NSCommand(ctx, "nft", "delete", "table", "bridge", d.table).CombinedOutput(); err != nil {
		return fmt.Errorf("lab: nft delete %s: %w\n%s", d.table, err, out)
	}
	return nil
}
