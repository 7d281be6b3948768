package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/reelkit/reel/recorder/accesslog"
	"github.com/reelkit/reel/recorder/capture"
)

// captureFlags are reel record's passive sources: live capture, pcap
// import and access-log import.
type captureFlags struct {
	iface       string
	pcaps       []string
	ports       []string
	accessLogs  []string
	logFields   []string
	promisc     bool
	snapLen     int64
	gapTimeout  time.Duration
	idleTimeout time.Duration
}

func addCaptureFlags(fs *pflag.FlagSet, f *captureFlags) {
	fs.StringVar(&f.iface, "iface", "", "capture from this interface (e.g. eth0, lo); needs CAP_NET_RAW")
	fs.StringArrayVar(&f.pcaps, "pcap", nil, "import this pcap or pcapng file (repeatable, in time order)")
	fs.StringSliceVar(&f.ports, "port", nil, "server TCP port for --iface/--pcap (repeatable or comma-separated)")
	fs.StringArrayVar(&f.accessLogs, "access-log", nil, "import this nginx JSON access log (repeatable; - for stdin)")
	fs.StringArrayVar(&f.logFields, "log-field", nil, "access-log field mapping column=field, e.g. time=ts or header:x-gpu=upstream_http_x_gpu (repeatable)")
	fs.BoolVar(&f.promisc, "promisc", false, "with --iface: promiscuous mode (traffic not addressed to this host)")
	fs.Var(newSizeValue(256<<10, &f.snapLen), "snaplen", "with --iface: bytes kept per packet; GRO/TSO packets exceed the MTU")
	fs.DurationVar(&f.gapTimeout, "gap-timeout", capture.DefaultGapTimeout, "with --iface/--pcap: wait this long (packet time) for a missing TCP segment before recording a gap")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", capture.DefaultIdleTimeout, "with --iface/--pcap: forget connections idle this long")
}

// captureSource picks the passive source the flags ask for; nil when none.
func captureSource(f *captureFlags) (func(context.Context, *recordEnv, *recordFlags) error, string, error) {
	n := 0
	for _, set := range []bool{f.iface != "", len(f.pcaps) > 0, len(f.accessLogs) > 0} {
		if set {
			n++
		}
	}
	if n > 1 {
		return nil, "", &usageError{msg: "give one source: --iface, --pcap or --access-log", hint: "reel record --pcap capture.pcapng --port 8000 --out DIR"}
	}
	switch {
	case f.iface != "":
		return recordLive, "capture:" + f.iface, nil
	case len(f.pcaps) > 0:
		return recordPcap, "pcap:" + strings.Join(f.pcaps, ","), nil
	case len(f.accessLogs) > 0:
		return recordAccessLog, "access-log:" + strings.Join(f.accessLogs, ","), nil
	}
	return nil, "", nil
}

func parsePorts(list []string) ([]uint16, error) {
	var ports []uint16
	for _, s := range list {
		p, err := strconv.ParseUint(strings.TrimSpace(s), 10, 16)
		if err != nil || p == 0 {
			return nil, &usageError{msg: fmt.Sprintf("--port %q: want a TCP port number", s), hint: "reel record --iface eth0 --port 8000 --out DIR"}
		}
		ports = append(ports, uint16(p))
	}
	if len(ports) == 0 {
		return nil, &usageError{msg: "--port is required with --iface and --pcap (the server's port tells requests from responses)",
			hint: "reel record --iface eth0 --port 8000 --out DIR"}
	}
	return ports, nil
}

// newCaptureEngine builds the engine for --iface and --pcap, feeding the
// recorder, with its counters on the recorder's registry.
func newCaptureEngine(env *recordEnv, f *recordFlags) (*capture.Engine, error) {
	ports, err := parsePorts(f.capture.ports)
	if err != nil {
		return nil, err
	}
	e, err := capture.NewEngine(capture.Options{
		Ports: ports, Recorder: env.rec,
		GapTimeout: f.capture.gapTimeout, IdleTimeout: f.capture.idleTimeout,
	})
	if err != nil {
		return nil, err
	}
	if err := env.reg.Register(e.Stats().Collector()); err != nil {
		return nil, fmt.Errorf("register capture metrics: %w", err)
	}
	return e, nil
}

// recordLive captures from --iface until ctx ends. Like the proxy it is
// fail-open: when the queue is full, exchanges are dropped and counted.
func recordLive(ctx context.Context, env *recordEnv, f *recordFlags) error {
	snap := f.capture.snapLen
	e, err := newCaptureEngine(env, f)
	if err != nil {
		return err
	}
	// The line goes out once the socket is open and filtered, so a script
	// (or an operator) that waits for it knows traffic from then on is
	// recorded.
	started := func() {
		fmt.Fprintf(env.stderr, "reel record: capturing %s port %s, recording to %s\n", f.capture.iface, strings.Join(f.capture.ports, ","), f.out)
	}
	err = capture.Live(ctx, e, capture.LiveOptions{Interface: f.capture.iface, SnapLen: int(snap), Promiscuous: f.capture.promisc, Started: started})
	printCaptureStats(env.stderr, e.Stats().Snapshot())
	if errors.Is(err, capture.ErrNoCapNetRaw) {
		return &usageError{msg: err.Error(), hint: "sudo setcap cap_net_raw+ep $(command -v reel)   or   reel record --pcap FILE --port 8000 --out DIR"}
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// recordPcap imports the --pcap files, in order, into one engine.
func recordPcap(ctx context.Context, env *recordEnv, f *recordFlags) error {
	e, err := newCaptureEngine(env, f)
	if err != nil {
		return err
	}
	var readErr error
	for _, path := range f.capture.pcaps {
		file, err := os.Open(path)
		if err != nil {
			readErr = fmt.Errorf("open capture: %w", err)
			break
		}
		err = capture.ReadFile(ctx, file, e)
		file.Close()
		if err != nil {
			readErr = fmt.Errorf("%s: %w", path, err)
			break
		}
	}
	e.Finish()
	printCaptureStats(env.stderr, e.Stats().Snapshot())
	return readErr
}

// recordAccessLog imports the --access-log files.
func recordAccessLog(ctx context.Context, env *recordEnv, f *recordFlags) error {
	mapping, err := accesslog.ParseMapping(f.capture.logFields)
	if err != nil {
		return &usageError{msg: err.Error(), hint: "reel record --access-log FILE --log-field time=ts --out DIR"}
	}
	for _, path := range f.capture.accessLogs {
		var r io.Reader = os.Stdin
		if path != "-" {
			file, err := os.Open(path)
			if err != nil {
				return fmt.Errorf("open access log: %w", err)
			}
			defer file.Close()
			r = file
		}
		rep, err := accesslog.Import(ctx, r, accesslog.Options{Mapping: mapping, Recorder: env.rec})
		fmt.Fprintf(env.stderr, "reel record: %s: %d lines, %d exchanges, %d bad lines\n", path, rep.Lines, rep.Imported, rep.Bad)
		for _, le := range rep.Errors {
			fmt.Fprintf(env.stderr, "  %s:%d: %v\n", path, le.Line, le.Err)
		}
		if rep.Bad > len(rep.Errors) {
			fmt.Fprintf(env.stderr, "  … and %d more bad lines\n", rep.Bad-len(rep.Errors))
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}

func printCaptureStats(w io.Writer, s capture.Snapshot) {
	fmt.Fprintf(w, "reel record: %d packets, %d connections, %d exchanges, %d reassembly gaps (%d bytes)",
		s.Packets, s.Connections, s.Exchanges, s.Gaps, s.GapBytes)
	if s.KernelRecv > 0 {
		fmt.Fprintf(w, ", kernel: %d received, %d dropped", s.KernelRecv, s.KernelDrops)
	}
	fmt.Fprintln(w)
	if len(s.Incomplete) > 0 {
		reasons := make([]string, 0, len(s.Incomplete))
		for r, n := range s.Incomplete {
			reasons = append(reasons, fmt.Sprintf("%s %d", r, n))
		}
		sort.Strings(reasons)
		fmt.Fprintf(w, "reel record: incomplete exchanges (complete=false): %s\n", strings.Join(reasons, ", "))
	}
	if n := s.Skipped["snap_trunc"]; n > 0 {
		fmt.Fprintf(w, "reel record: %d packets were cut by the snap length; raise --snaplen\n", n)
	}
}
