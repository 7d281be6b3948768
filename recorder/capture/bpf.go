package capture

import (
	"fmt"

	"golang.org/x/net/bpf"
)

// maxFilterPorts bounds the ports one filter matches: each port costs two
// instructions per IP version and jumps are at most 255 instructions.
const maxFilterPorts = 24

// packetOutgoing is the PACKET_OUTGOING packet type (linux/if_packet.h).
const packetOutgoing = 4

// Filter assembles the classic BPF program a live capture attaches to its
// socket: IPv4 or IPv6 TCP segments (not fragments) whose source or
// destination port is one of ports, on a link with an Ethernet header
// (ethernet true) or raw IP. With dropOutgoing it also rejects packets the
// host sent (PACKET_OUTGOING), which on loopback are the duplicates of
// every incoming packet. The filter accepts up to snap bytes of a packet.
func Filter(ports []uint16, ethernet, dropOutgoing bool, snap uint32) ([]bpf.RawInstruction, error) {
	if len(ports) == 0 {
		return nil, ErrNoPorts
	}
	if len(ports) > maxFilterPorts {
		return nil, fmt.Errorf("assemble filter: %d ports, at most %d", len(ports), maxFilterPorts)
	}
	l := uint32(0) // offset of the IP header
	if ethernet {
		l = 14
	}
	var p []bpf.Instruction
	// Jumps are written with symbolic targets and resolved below.
	type fix struct {
		at     int
		target string
		onTrue bool
	}
	var fixes []fix
	labels := map[string]int{}
	jump := func(cond bpf.JumpTest, val uint32, ifTrue, ifFalse string) {
		p = append(p, bpf.JumpIf{Cond: cond, Val: val})
		if ifTrue != "" {
			fixes = append(fixes, fix{len(p) - 1, ifTrue, true})
		}
		if ifFalse != "" {
			fixes = append(fixes, fix{len(p) - 1, ifFalse, false})
		}
	}
	label := func(name string) { labels[name] = len(p) }

	if dropOutgoing {
		p = append(p, bpf.LoadExtension{Num: bpf.ExtType})
		jump(bpf.JumpEqual, packetOutgoing, "reject", "")
	}
	if ethernet {
		p = append(p, bpf.LoadAbsolute{Off: 12, Size: 2})
		jump(bpf.JumpEqual, 0x0800, "ip4", "")
		jump(bpf.JumpEqual, 0x86dd, "ip6", "reject")
	} else {
		p = append(p, bpf.LoadAbsolute{Off: 0, Size: 1}, bpf.ALUOpConstant{Op: bpf.ALUOpShiftRight, Val: 4})
		jump(bpf.JumpEqual, 4, "ip4", "")
		jump(bpf.JumpEqual, 6, "ip6", "reject")
	}
	ports4 := func(srcOff, dstOff bpf.Instruction) {
		p = append(p, srcOff)
		for _, port := range ports {
			jump(bpf.JumpEqual, uint32(port), "accept", "")
		}
		p = append(p, dstOff)
		for i, port := range ports {
			if i == len(ports)-1 {
				jump(bpf.JumpEqual, uint32(port), "accept", "reject")
			} else {
				jump(bpf.JumpEqual, uint32(port), "accept", "")
			}
		}
	}
	label("ip4")
	p = append(p, bpf.LoadAbsolute{Off: l + 9, Size: 1})
	jump(bpf.JumpEqual, 6, "", "reject")
	p = append(p, bpf.LoadAbsolute{Off: l + 6, Size: 2})
	jump(bpf.JumpBitsSet, 0x1fff, "reject", "") // a non-first fragment has no TCP header
	p = append(p, bpf.LoadMemShift{Off: l})     // X = IP header length
	ports4(bpf.LoadIndirect{Off: l, Size: 2}, bpf.LoadIndirect{Off: l + 2, Size: 2})
	label("ip6")
	p = append(p, bpf.LoadAbsolute{Off: l + 6, Size: 1})
	jump(bpf.JumpEqual, 6, "", "reject") // TCP right after the fixed header only
	ports4(bpf.LoadAbsolute{Off: l + 40, Size: 2}, bpf.LoadAbsolute{Off: l + 42, Size: 2})
	label("accept")
	p = append(p, bpf.RetConstant{Val: snap})
	label("reject")
	p = append(p, bpf.RetConstant{Val: 0})

	for _, f := range fixes {
		target, ok := labels[f.target]
		skip := target - f.at - 1
		if !ok || skip < 0 || skip > 255 {
			return nil, fmt.Errorf("assemble filter: jump to %s out of range", f.target)
		}
		j := p[f.at].(bpf.JumpIf)
		if f.onTrue {
			j.SkipTrue = uint8(skip)
		} else {
			j.SkipFalse = uint8(skip)
		}
		p[f.at] = j
	}
	raw, err := bpf.Assemble(p)
	if err != nil {
		return nil, fmt.Errorf("assemble filter: %w", err)
	}
	return raw, nil
}
