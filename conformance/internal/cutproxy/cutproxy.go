// Package cutproxy is a TCP proxy that breaks connections the way the
// network between a client and a box does: it cuts a connection that
// carried no byte for its idle bound (as common load balancers do, 16 s by
// default), and cuts every open connection on demand (a dropped client
// connection). The chaos cases of the conformance suite put it between
// their clients and the box. Where a box's endpoint has a transport of its
// own that the proxy cannot dial through (a vendor's gateway), Transport
// makes the same cuts at the client's end of the connection.
package cutproxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultIdle is the idle bound of common load balancers.
const DefaultIdle = 16 * time.Second

// Proxy forwards the connections it accepts to one target address.
type Proxy struct {
	ln     net.Listener
	target string
	idle   time.Duration

	mu     sync.Mutex
	conns  map[*pair]struct{}
	bodies map[*cutBody]struct{}
	closed bool
	wg     sync.WaitGroup
	stop   chan struct{}

	idleCuts, drops atomic.Int64
}

// Start listens on a free loopback port and forwards to target; with an
// empty target it listens on nothing and cuts only what Transport
// carries. idle is the idle bound: 0 means DefaultIdle, negative never.
func Start(target string, idle time.Duration) (*Proxy, error) {
	if idle == 0 {
		idle = DefaultIdle
	}
	p := &Proxy{target: target, idle: idle, conns: map[*pair]struct{}{}, bodies: map[*cutBody]struct{}{}, stop: make(chan struct{})}
	if target != "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		p.ln = ln
		p.wg.Go(p.accept)
	}
	if idle > 0 {
		p.wg.Go(p.watchBodies)
	}
	return p, nil
}

// Addr is the address clients dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// DialContext dials the proxy whatever address is asked, for an
// http.Transport whose requests keep their URL (and Host) while going
// through the proxy.
func (p *Proxy) DialContext(ctx context.Context, network, _ string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, p.Addr())
}

// IdleCuts is how many connections the idle bound cut; Drops how many
// Drop cut.
func (p *Proxy) IdleCuts() int64 { return p.idleCuts.Load() }

// Drops is how many connections Drop cut.
func (p *Proxy) Drops() int64 { return p.drops.Load() }

// Drop cuts every open connection (and response body of Transport) now
// and returns how many it cut.
func (p *Proxy) Drop() int {
	p.mu.Lock()
	pairs := make([]*pair, 0, len(p.conns))
	for c := range p.conns {
		pairs = append(pairs, c)
	}
	bodies := make([]*cutBody, 0, len(p.bodies))
	for b := range p.bodies {
		bodies = append(bodies, b)
	}
	p.mu.Unlock()
	// Counted before the cuts: whoever sees a cut sees it counted.
	n := len(pairs) + len(bodies)
	p.drops.Add(int64(n))
	for _, c := range pairs {
		c.close()
	}
	for _, b := range bodies {
		b.cut()
	}
	return n
}

// Close stops accepting, cuts every connection and waits for the copies.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	close(p.stop)
	var err error
	if p.ln != nil {
		err = p.ln.Close()
	}
	p.Drop()
	p.wg.Wait()
	return err
}

// Transport returns rt with the proxy's cuts made on its responses: Drop
// cuts their bodies, and the idle bound cuts a body that delivered
// nothing for that long, as a cut connection ends a response.
func (p *Proxy) Transport(rt http.RoundTripper) http.RoundTripper { return cutTransport{p: p, rt: rt} }

type cutTransport struct {
	p  *Proxy
	rt http.RoundTripper
}

func (t cutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	resp, err := t.rt.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	b := &cutBody{p: t.p, rc: resp.Body, cancel: cancel}
	b.last.Store(time.Now().UnixNano())
	t.p.mu.Lock()
	t.p.bodies[b] = struct{}{}
	t.p.mu.Unlock()
	resp.Body = b
	return resp, nil
}

// cutBody is a response body the proxy may cut.
type cutBody struct {
	p      *Proxy
	rc     io.ReadCloser
	cancel context.CancelFunc
	last   atomic.Int64
	isCut  atomic.Bool
	once   sync.Once
}

func (b *cutBody) Read(buf []byte) (int, error) {
	n, err := b.rc.Read(buf)
	if n > 0 {
		b.last.Store(time.Now().UnixNano())
	}
	if b.isCut.Load() {
		return n, errCut
	}
	return n, err
}

func (b *cutBody) Close() error {
	b.forget()
	return b.rc.Close()
}

func (b *cutBody) forget() {
	b.once.Do(func() {
		b.p.mu.Lock()
		delete(b.p.bodies, b)
		b.p.mu.Unlock()
		b.cancel()
	})
}

func (b *cutBody) cut() {
	b.isCut.Store(true)
	b.forget()
	_ = b.rc.Close()
}

// errCut is what a read of a cut response body returns.
var errCut = errors.New("cutproxy: connection cut")

// watchBodies cuts Transport's bodies idle for the bound.
func (p *Proxy) watchBodies() {
	tick := time.NewTicker(min(p.idle/4, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case now := <-tick.C:
			p.mu.Lock()
			var idle []*cutBody
			for b := range p.bodies {
				if now.Sub(time.Unix(0, b.last.Load())) >= p.idle {
					idle = append(idle, b)
				}
			}
			p.mu.Unlock()
			for _, b := range idle {
				p.idleCuts.Add(1) // before the cut, as Drop counts
				b.cut()
			}
		}
	}
}

type pair struct {
	client, server net.Conn
	last           atomic.Int64 // unix nanos of the last byte either way
	once           sync.Once
}

func (c *pair) close() {
	c.once.Do(func() {
		c.client.Close()
		c.server.Close()
	})
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.DialTimeout("tcp", p.target, 10*time.Second)
		if err != nil {
			client.Close()
			continue
		}
		c := &pair{client: client, server: server}
		c.last.Store(time.Now().UnixNano())
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.close()
			return
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.serve(c) })
	}
}

// serve copies both ways until either side ends or the idle bound cuts.
func (p *Proxy) serve(c *pair) {
	defer func() {
		c.close()
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(writerFunc(func(b []byte) (int, error) {
			c.last.Store(time.Now().UnixNano())
			return dst.Write(b)
		}), src)
		done <- struct{}{}
	}
	go cp(c.server, c.client)
	go cp(c.client, c.server)
	if p.idle < 0 {
		<-done
		return
	}
	tick := time.NewTicker(min(p.idle/4, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-tick.C:
			if now.Sub(time.Unix(0, c.last.Load())) >= p.idle {
				p.idleCuts.Add(1)
				return
			}
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
