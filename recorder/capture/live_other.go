//go:build !linux

package capture

import (
	"context"
	"errors"
	"time"
)

// LiveOptions configure Live. Interface is required; the zero value of
// every other field works.
type LiveOptions struct {
	Interface    string        // interface name, e.g. eth0 or lo
	SnapLen      int           // bytes kept of each packet (default 262144)
	Promiscuous  bool          // also capture traffic not addressed to this host
	StatsEvery   time.Duration // how often kernel drops are read (default 1s)
	SocketBuffer int           // receive ring size (default 16 MiB)
	Started      func()        // called once capturing
}

// ErrNoCapNetRaw is wrapped by Live's error when the process may not open a
// packet socket.
var ErrNoCapNetRaw = errors.New("passive capture needs CAP_NET_RAW")

// Live is only implemented on Linux (AF_PACKET sockets without cgo).
func Live(ctx context.Context, e *Engine, opts LiveOptions) error {
	return errors.New("live capture is only supported on Linux; import a pcap file with ReadFile instead")
}
