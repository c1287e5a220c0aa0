package jail

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// lowPortShift is added to an endpoint port below 1024: an unprivileged
// jail cannot bind it, so the relay listens on port+lowPortShift and the
// harness is given that port (TLS checks the name, not the port).
const lowPortShift = 10000

// endpoint is the one destination of a net-jailed harness.
type endpoint struct {
	// dial is the host:port the forwarder dials, outside the jail.
	dial string
	// allow is dial in canonical allow-list form (lowercase host).
	allow string
	// listen is the relay's address inside the jail.
	listen string
	// name is the DNS name the jail's /etc/hosts maps to loopback ("" for
	// an IP address).
	name string
	// url is the model endpoint URL the harness is given.
	url string
}

// parseEndpoint derives the network jail's endpoint from the model
// endpoint URL.
func parseEndpoint(raw string) (*endpoint, error) {
	if raw == "" {
		return nil, errors.New("the bridge has no model endpoint (TANGLE_ROUTER_URL), so a net jail would allow nothing")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return nil, fmt.Errorf("the model endpoint %q is not an http(s) URL", raw)
	}
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return nil, fmt.Errorf("the model endpoint %q has no usable port", raw)
	}
	inner := p
	if p < 1024 {
		inner = p + lowPortShift
	}
	ep := &endpoint{dial: net.JoinHostPort(host, port), allow: host + ":" + port}
	listenHost, urlHost := "127.0.0.1", host
	switch ip := net.ParseIP(host); {
	case ip == nil:
		ep.name = host
	case ip.IsLoopback():
		listenHost = host
	case u.Scheme == "http":
		urlHost = "127.0.0.1"
	default:
		return nil, fmt.Errorf("the https model endpoint %s is named by an IP address, which the net jail cannot serve inside its own network "+
			"(the certificate names that address); name it by a DNS name", ep.allow)
	}
	ep.listen = net.JoinHostPort(listenHost, strconv.Itoa(inner))
	ep.url = raw
	if urlHost != host || inner != p {
		v := *u
		v.Host = net.JoinHostPort(urlHost, strconv.Itoa(inner))
		ep.url = v.String()
	}
	return ep, nil
}

// hostsFile is the /etc/hosts of a net jail: loopback, and the endpoint's
// DNS name on the relay's address.
func (ep *endpoint) hostsFile() []byte {
	var b strings.Builder
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	if ep.name != "" && ep.name != "localhost" {
		fmt.Fprintf(&b, "127.0.0.1\t%s\n", ep.name)
	}
	return []byte(b.String())
}

// forwarder is the bridge's end of one net jail: a Unix socket, mounted
// into the jail, whose every connection it carries to the endpoint. It
// dials nothing else.
type forwarder struct {
	dir   string // private directory of the socket and the hosts file
	sock  string
	hosts string
	ln    net.Listener
	dial  string
	log   *slog.Logger

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// startForwarder opens the forwarder of a net jail to ep.
func startForwarder(ep *endpoint, log *slog.Logger) (*forwarder, error) {
	dir, err := os.MkdirTemp("", "box-bridge-net-")
	if err == nil && len(dir) > 90 { // a Unix socket path has at most 107 bytes
		os.Remove(dir)
		dir, err = os.MkdirTemp("/tmp", "box-bridge-net-")
	}
	if err != nil {
		return nil, fmt.Errorf("net jail: %w", err)
	}
	f := &forwarder{dir: dir, sock: filepath.Join(dir, "model.sock"), hosts: filepath.Join(dir, "hosts"), dial: ep.dial,
		log: log, conns: map[net.Conn]struct{}{}}
	if err := os.WriteFile(f.hosts, ep.hostsFile(), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("net jail: %w", err)
	}
	if f.ln, err = net.Listen("unix", f.sock); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("net jail: %w", err)
	}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

func (f *forwarder) serve() {
	defer f.wg.Done()
	for {
		in, err := f.ln.Accept()
		if err != nil {
			return
		}
		if !f.track(in) {
			in.Close()
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer f.untrack(in)
			out, err := net.DialTimeout("tcp", f.dial, 30*time.Second)
			if err != nil {
				f.log.Debug("net jail: dial the model endpoint", "endpoint", f.dial, "err", err)
				in.Close()
				return
			}
			if !f.track(out) {
				in.Close()
				out.Close()
				return
			}
			defer f.untrack(out)
			pipe(in, out)
		}()
	}
}

// track registers c for close; false once the forwarder is closed.
func (f *forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *forwarder) untrack(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
}

// close stops accepting, ends the open connections, waits for them and
// removes the socket's directory.
func (f *forwarder) close() {
	f.mu.Lock()
	f.closed = true
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.ln.Close()
	f.wg.Wait()
	os.RemoveAll(f.dir)
}

// pipe copies a to b and b to a until both directions ended, passing each
// end of stream on as a half close, then closes both.
func pipe(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
	a.Close()
	b.Close()
}
