package kubernetes

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

type forwardKey struct {
	box  string
	port int
}

// forwarder listens on 127.0.0.1 and carries each local connection to a
// port of a pod over a port-forward connection of its own to the API
// server. Unlike kubectl's forwarder, which shares one and gives up on the
// first error, a connection the pod refuses (a server not listening yet)
// ends that connection only: a shared one stops answering new streams
// after such an error.
type forwarder struct {
	log *slog.Logger
	ln  net.Listener
	// newDialer makes the dialer of one port-forward connection.
	newDialer func() (httpstream.Dialer, error)
	port      int

	mu     sync.Mutex
	conns  map[httpstream.Connection]bool
	closed bool
	wg     sync.WaitGroup
	// spare receives the port-forward connection prime dialed ahead for
	// the next local connection (nil when that dial failed).
	spare chan httpstream.Connection
}

// forward returns the vendor's forwarder to port of b's pod, starting one
// when there is none.
func (v *Vendor) forward(b *Box, port int) (*forwarder, error) {
	key := forwardKey{b.id, port}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return nil, errors.New("the vendor is closed")
	}
	if f := v.forwards[key]; f != nil {
		return f, nil
	}
	u := v.core.CoreV1().RESTClient().Post().Namespace(v.ns).Resource("pods").Name(b.pod).SubResource("portforward").URL()
	// client-go's dialers remember the connection they made: a fresh one
	// for every dial.
	newDialer := func() (httpstream.Dialer, error) {
		rt, upgrader, err := spdy.RoundTripperFor(v.cfg)
		if err != nil {
			return nil, err
		}
		spdyDialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, u)
		wsDialer, err := portforward.NewSPDYOverWebsocketDialer(u, v.cfg)
		if err != nil {
			return nil, err
		}
		return portforward.NewFallbackDialer(wsDialer, spdyDialer, func(err error) bool {
			return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
		}), nil
	}
	if _, err := newDialer(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &forwarder{log: v.o.logger.With("box", b.id, "port", port), ln: ln, newDialer: newDialer, port: port,
		conns: map[httpstream.Connection]bool{}}
	f.wg.Add(1)
	go f.serve()
	v.forwards[key] = f
	return f, nil
}

// stopForwards closes the forwarders to box id.
func (v *Vendor) stopForwards(id string) {
	v.mu.Lock()
	var fs []*forwarder
	for k, f := range v.forwards {
		if k.box == id {
			fs = append(fs, f)
			delete(v.forwards, k)
		}
	}
	v.mu.Unlock()
	for _, f := range fs {
		f.Close()
	}
}

// Addr is the local address (127.0.0.1:port) of the forward.
func (f *forwarder) Addr() string { return f.ln.Addr().String() }

// Close stops listening and ends the forwarded connections.
func (f *forwarder) Close() {
	f.mu.Lock()
	f.closed = true
	conns := f.conns
	f.conns = map[httpstream.Connection]bool{}
	f.mu.Unlock()
	f.ln.Close()
	for c := range conns {
		c.Close()
	}
	f.wg.Wait()
}

func (f *forwarder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer c.Close()
			if err := f.handle(c); err != nil {
				f.log.Debug("port-forward connection ended", "err", err)
			}
		}()
	}
}

// prime dials a port-forward connection ahead, in the background, for
// the next local connection: a box about to be called (a claimed one)
// then waits for no dial.
func (f *forwarder) prime() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.spare != nil || f.closed {
		return
	}
	ch := make(chan httpstream.Connection, 1)
	f.spare = ch
	go func() {
		conn, err := f.dial()
		if err != nil {
			f.log.Debug("port-forward: prime", "err", err)
			conn = nil
		}
		ch <- conn
	}()
}

// take returns the primed connection, else a new one; the caller closes
// it with release.
func (f *forwarder) take() (httpstream.Connection, error) {
	f.mu.Lock()
	ch := f.spare
	f.spare = nil
	f.mu.Unlock()
	if ch != nil {
		if conn := <-ch; conn != nil {
			return conn, nil
		}
	}
	return f.dial()
}

// dial opens a port-forward connection, which the caller closes with
// release.
func (f *forwarder) dial() (httpstream.Connection, error) {
	dialer, err := f.newDialer()
	if err != nil {
		return nil, fmt.Errorf("port-forward: %w", err)
	}
	conn, proto, err := dialer.Dial(portforward.PortForwardProtocolV1Name)
	if err != nil {
		return nil, fmt.Errorf("port-forward: %w", err)
	}
	if proto != portforward.PortForwardProtocolV1Name {
		conn.Close()
		return nil, fmt.Errorf("port-forward: the server speaks %q", proto)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		conn.Close()
		return nil, net.ErrClosed
	}
	f.conns[conn] = true
	return conn, nil
}

func (f *forwarder) release(conn httpstream.Connection) {
	f.mu.Lock()
	delete(f.conns, conn)
	f.mu.Unlock()
	conn.Close()
}

// handle carries one local connection over a pair of streams (error and
// data), as the port-forward protocol has it.
func (f *forwarder) handle(c net.Conn) error {
	conn, err := f.take()
	if err != nil {
		return err
	}
	defer f.release(conn)
	h := http.Header{}
	h.Set(corev1.StreamType, corev1.StreamTypeError)
	h.Set(corev1.PortHeader, strconv.Itoa(f.port))
	h.Set(corev1.PortForwardRequestIDHeader, "0")
	errStream, err := conn.CreateStream(h)
	if err != nil {
		return err
	}
	errStream.Close()
	defer conn.RemoveStreams(errStream)
	remoteErr := make(chan error, 1)
	go func() {
		msg, err := io.ReadAll(errStream)
		if err == nil && len(msg) > 0 {
			err = errors.New(string(msg))
		}
		remoteErr <- err
	}()
	h.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := conn.CreateStream(h)
	if err != nil {
		return err
	}
	defer conn.RemoveStreams(data)
	remoteDone, localErr := make(chan struct{}), make(chan struct{})
	go func() {
		_, _ = io.Copy(c, data)
		close(remoteDone)
	}()
	go func() {
		defer data.Close() // no more to send
		if _, err := io.Copy(data, c); err != nil {
			close(localErr)
		}
	}()
	gotErr := false
	select {
	case <-remoteDone:
	case <-localErr:
	case err = <-remoteErr:
		gotErr = true
		if err == nil {
			// The pod's side ended: let the data drain.
			select {
			case <-remoteDone:
			case <-localErr:
			}
		}
		// Otherwise the pod refused or dropped the connection: end this
		// one only.
	}
	// Discard unsent data so the error stream can end.
	_ = data.Reset()
	if !gotErr {
		err = <-remoteErr
	}
	return err
}
