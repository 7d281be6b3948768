package replayer

import (
	"container/list"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"sync"
	"time"
)

// This file owns the replayer's connections to the target: dialling (TCP,
// TLS with ALPN http/1.1), the bounded pool of --conn pooled, and the one
// connection per recorded connection of --conn recorded (LRU).

// idleTimeout closes a connection idle for longer instead of reusing it.
const idleTimeout = 90 * time.Second

// dialTimeout bounds a dial and a TLS handshake.
const dialTimeout = 10 * time.Second

// conn is one connection to the target. It is used by one request at a
// time; between requests it sits idle in a pool.
type conn struct {
	nc     net.Conn
	key    string // ConnRecorded: the recorded connection; "" = pooled
	reused bool   // it has carried a response before
	idle   int64  // mono ns when it was last put back
	stop   func() bool
}

// close closes the connection and forgets the run's cancellation hook.
func (cn *conn) close() {
	cn.stop()
	cn.nc.Close()
}

// dialer opens connections to one target.
type dialer struct {
	ctx  context.Context // the run: cancelling it breaks every connection's I/O
	addr string          // host:port
	tls  *tls.Config     // nil for http
	d    net.Dialer
	wait time.Duration // bound on a dial and its TLS handshake
}

// newDialer dials target; timeout (the per-request one, 0 = none) shortens
// the dial's own bound.
func newDialer(ctx context.Context, target *url.URL, cfg *tls.Config, timeout time.Duration) *dialer {
	port := target.Port()
	wait := dialTimeout
	if timeout > 0 {
		wait = min(wait, timeout)
	}
	dl := &dialer{ctx: ctx, wait: wait, d: net.Dialer{KeepAlive: 30 * time.Second}}
	if target.Scheme == "https" {
		if port == "" {
			port = "443"
		}
		if cfg == nil {
			cfg = &tls.Config{}
		} else {
			cfg = cfg.Clone()
		}
		cfg.NextProtos = []string{"http/1.1"} // this client speaks HTTP/1.1 only
		if cfg.ServerName == "" {
			cfg.ServerName = target.Hostname()
		}
		dl.tls = cfg
	}
	if port == "" {
		port = "80"
	}
	dl.addr = net.JoinHostPort(target.Hostname(), port)
	return dl
}

// aLongTimeAgo is a deadline in the past: setting it breaks blocked I/O.
var aLongTimeAgo = time.Unix(1, 0)

// dial opens a connection; the run's cancellation breaks its I/O from then
// on (one hook per connection, none per request).
func (dl *dialer) dial(key string) (*conn, error) {
	ctx, cancel := context.WithTimeout(dl.ctx, dl.wait)
	defer cancel()
	nc, err := dl.d.DialContext(ctx, "tcp", dl.addr)
	if err != nil {
		return nil, err
	}
	if dl.tls != nil {
		tc := tls.Client(nc, dl.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("tls handshake: %w", err)
		}
		if p := tc.ConnectionState().NegotiatedProtocol; p != "" && p != "http/1.1" {
			tc.Close()
			return nil, fmt.Errorf("tls: target negotiated %q, want http/1.1", p)
		}
		nc = tc
	}
	cn := &conn{nc: nc, key: key}
	cn.stop = context.AfterFunc(dl.ctx, func() { nc.SetDeadline(aLongTimeAgo) })
	return cn, nil
}

// pool keeps the connections of --conn pooled: at most max open at once
// (idle ones included). A request that finds none idle and the pool full
// waits for a connection or a free slot; the wait shows as lag.
type pool struct {
	dl  *dialer
	max int // 0 = no limit

	mu    sync.Mutex   // guards the fields below
	idle  []*conn      // LIFO: the most recently used first, so the rest age out
	open  int          // connections open or being dialled
	queue []chan *conn // requests waiting; nil sent = a slot reserved to dial in
}

// get returns an idle connection or a new one.
func (p *pool) get(ctx context.Context) (*conn, error) {
	now := mono()
	p.mu.Lock()
	for n := len(p.idle); n > 0; n = len(p.idle) {
		cn := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		if time.Duration(now-cn.idle) < idleTimeout {
			p.mu.Unlock()
			return cn, nil
		}
		p.open--
		cn.close()
	}
	if p.canDialLocked() {
		p.open++
		p.mu.Unlock()
		return p.dial()
	}
	ch := make(chan *conn, 1)
	p.queue = append(p.queue, ch)
	p.mu.Unlock()
	select {
	case cn := <-ch:
		if cn == nil {
			return p.dial()
		}
		return cn, nil
	case <-ctx.Done():
		p.mu.Lock()
		for i, q := range p.queue {
			if q == ch {
				p.queue = append(p.queue[:i], p.queue[i+1:]...)
				p.mu.Unlock()
				return nil, ctx.Err()
			}
		}
		p.mu.Unlock()
		if cn := <-ch; cn != nil { // handed over just now: pass it on
			p.put(cn)
		} else {
			p.release()
		}
		return nil, ctx.Err()
	}
}

// tryGet returns an idle connection, or nil when none is ready.
func (p *pool) tryGet() *conn {
	now := mono()
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.idle); n > 0 && time.Duration(now-p.idle[n-1].idle) < idleTimeout {
		cn := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		return cn
	}
	return nil
}

// full reports whether a request now would wait for a connection: none is
// idle and the limit's worth are open.
func (p *pool) full() bool {
	if p.max == 0 {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle) == 0 && p.open >= p.max
}

func (p *pool) canDialLocked() bool {
	return p.max == 0 || p.open < p.max
}

// serveLocked reserves dial slots for waiting requests while the limits
// allow. Each waiter's channel has room for its one value: never blocks.
func (p *pool) serveLocked() {
	for len(p.queue) > 0 && p.canDialLocked() {
		ch := p.queue[0]
		p.queue = p.queue[1:]
		p.open++
		ch <- nil
	}
}

// dial opens a connection in a slot already counted in open.
func (p *pool) dial() (*conn, error) {
	cn, err := p.dl.dial("")
	if err != nil {
		p.release()
	}
	return cn, err
}

// put returns a healthy connection after a complete response.
func (p *pool) put(cn *conn) {
	cn.reused = true
	cn.idle = mono()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) > 0 {
		ch := p.queue[0]
		p.queue = p.queue[1:]
		ch <- cn
		return
	}
	p.idle = append(p.idle, cn)
}

// discard closes a connection that cannot be reused and frees its slot.
func (p *pool) discard(cn *conn) {
	cn.close()
	p.release()
}

// release frees one slot: a waiting request may dial in it.
func (p *pool) release() {
	p.mu.Lock()
	p.open--
	p.serveLocked()
	p.mu.Unlock()
}

// closeIdle closes every idle connection.
func (p *pool) closeIdle() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.open -= len(idle)
	p.mu.Unlock()
	for _, cn := range idle {
		cn.close()
	}
}

// keyed keeps the connections of --conn recorded: one per recorded
// connection, at most max kept idle (least recently used closed first). The
// sender runs one request at a time per key, so a key's connection is never
// shared.
type keyed struct {
	dl  *dialer
	max int

	mu    sync.Mutex               // guards byKey and lru
	byKey map[string]*list.Element // key → element of lru holding *conn
	lru   *list.List
}

// get returns the key's idle connection or dials one.
func (k *keyed) get(key string) (*conn, error) {
	k.mu.Lock()
	if e, ok := k.byKey[key]; ok {
		cn := e.Value.(*conn)
		k.lru.Remove(e)
		delete(k.byKey, key)
		k.mu.Unlock()
		if time.Duration(mono()-cn.idle) < idleTimeout {
			return cn, nil
		}
		cn.close()
	} else {
		k.mu.Unlock()
	}
	return k.dl.dial(key)
}

// put keeps a healthy connection for its key's next request.
func (k *keyed) put(cn *conn) {
	cn.reused = true
	cn.idle = mono()
	var evict []*conn
	k.mu.Lock()
	if e, ok := k.byKey[cn.key]; ok { // cannot happen with one request per key; keep the newer
		evict = append(evict, e.Value.(*conn))
		k.lru.Remove(e)
	}
	k.byKey[cn.key] = k.lru.PushFront(cn)
	for k.lru.Len() > k.max {
		old := k.lru.Back()
		k.lru.Remove(old)
		oc := old.Value.(*conn)
		delete(k.byKey, oc.key)
		evict = append(evict, oc)
	}
	k.mu.Unlock()
	for _, oc := range evict {
		oc.close()
	}
}

// closeIdle closes every idle connection.
func (k *keyed) closeIdle() {
	k.mu.Lock()
	var all []*conn
	for e := k.lru.Front(); e != nil; e = e.Next() {
		all = append(all, e.Value.(*conn))
	}
	k.lru.Init()
	clear(k.byKey)
	k.mu.Unlock()
	for _, cn := range all {
		cn.close()
	}
}
