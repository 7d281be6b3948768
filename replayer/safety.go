package replayer

// Target safety: a replay must not reach production by accident. The
// recording names production twice — the hosts clients asked for (host)
// and the backends the sidecar forwarded to (upstream) — and a target may
// name either by another spelling (localhost for 127.0.0.1,
// [::ffff:127.0.0.1], a DNS alias). The check compares names and resolved
// addresses, unless Options.AllowRecordedHost says the target is a shadow.

import (
	"context"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/reelkit/reel/formats"
)

// maxResolvedHosts bounds the recorded names resolved for the alias check;
// names beyond are compared by spelling only.
const maxResolvedHosts = 64

// resolveTimeout bounds each name lookup of the check.
const resolveTimeout = 2 * time.Second

// upstreamHosts returns the hosts of a recorded upstream column value:
// "10.0.0.5:8000", "http://backend:8000/v1", or an access log's
// comma-separated retries "10.0.0.5:8000, 10.0.0.6:8000".
func upstreamHosts(v string) []string {
	var out []string
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if strings.Contains(part, "://") {
			if u, err := url.Parse(part); err == nil && u.Host != "" {
				part = u.Host
			}
		}
		if h := hostOnly(part); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// normalAddr parses a host as an IP address, IPv4-mapped IPv6 unmapped
// ([::ffff:127.0.0.1] is 127.0.0.1).
func normalAddr(host string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// addrsOf returns the addresses a host stands for: itself when it is an
// address, else what it resolves to (nothing when it does not resolve).
func addrsOf(ctx context.Context, r *net.Resolver, host string) []netip.Addr {
	if a, ok := normalAddr(host); ok {
		return []netip.Addr{a}
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	ips, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil
	}
	out := make([]netip.Addr, 0, len(ips))
	for _, ip := range ips {
		out = append(out, ip.Unmap().WithZone(""))
	}
	return out
}

// checkTarget refuses names (the target's host, and a Host header meant
// for it) that a recorded host or upstream names too, by spelling or by
// address.
func checkTarget(ctx context.Context, names []string, recorded map[string]string) error {
	r := net.DefaultResolver
	for _, n := range names {
		h := hostOnly(n)
		if h == "" {
			continue
		}
		if col, ok := recorded[h]; ok {
			return &RecordedHostError{Host: h, Column: col}
		}
		if a, ok := normalAddr(h); ok {
			if col, ok := recorded[a.String()]; ok {
				return &RecordedHostError{Host: h, Column: col, Recorded: a.String()}
			}
		}
	}
	// Aliases: compare addresses. Resolve the target once, then the
	// recorded names (bounded), stopping at the first shared address.
	want := map[netip.Addr]string{}
	for _, n := range names {
		for _, a := range addrsOf(ctx, r, hostOnly(n)) {
			want[a] = hostOnly(n)
		}
	}
	if len(want) == 0 {
		return nil
	}
	// Recorded names resolve concurrently, all within resolveTimeout, so
	// a slow resolver costs the start of a run seconds, not minutes.
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	type hit struct{ name, addr string }
	found := make(chan hit, len(recorded))
	var wg sync.WaitGroup
	n := 0
	for name := range recorded {
		if _, isAddr := normalAddr(name); !isAddr {
			if n >= maxResolvedHosts {
				continue
			}
			n++
		}
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			for _, a := range addrsOf(ctx, r, name) {
				if _, ok := want[a]; ok {
					found <- hit{name, a.String()}
					return
				}
			}
		}(name)
	}
	wg.Wait()
	close(found)
	for h := range found {
		a, _ := netip.ParseAddr(h.addr)
		return &RecordedHostError{Host: want[a], Column: recorded[h.name], Recorded: h.name, Addr: h.addr}
	}
	return nil
}

// noteHosts remembers x's recorded host and upstreams for checkTarget.
func (w *window) noteHosts(x *formats.Exchange) {
	if x.Host != "" {
		if h := hostOnly(x.Host); w.hosts[h] == "" {
			w.hosts[h] = "host"
		}
	}
	if x.Upstream != "" {
		for _, h := range upstreamHosts(x.Upstream) {
			if w.hosts[h] == "" {
				w.hosts[h] = "upstream"
			}
		}
	}
}
