// Package cutproxy is a TCP proxy that breaks connections the way the
// network between a client and a box does: it cuts a connection that
// carried no byte for its idle bound (as common load balancers do, 16 s by
// default), and cuts every open connection on demand (a dropped client
// connection). The chaos cases of the conformance suite put it between
// their clients and the box.
package cutproxy

import (
	"context"
	"io"
	"net"
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
	closed bool
	wg     sync.WaitGroup

	idleCuts, drops atomic.Int64
}

// Start listens on a free loopback port and forwards to target. idle is
// the idle bound: 0 means DefaultIdle, negative never.
func Start(target string, idle time.Duration) (*Proxy, error) {
	if idle == 0 {
		idle = DefaultIdle
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, idle: idle, conns: map[*pair]struct{}{}}
	p.wg.Go(p.accept)
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

// Drop cuts every open connection now and returns how many it cut.
func (p *Proxy) Drop() int {
	p.mu.Lock()
	pairs := make([]*pair, 0, len(p.conns))
	for c := range p.conns {
		pairs = append(pairs, c)
	}
	p.mu.Unlock()
	for _, c := range pairs {
		c.close()
	}
	p.drops.Add(int64(len(pairs)))
	return len(pairs)
}

// Close stops accepting, cuts every connection and waits for the copies.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Drop()
	p.wg.Wait()
	return err
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
