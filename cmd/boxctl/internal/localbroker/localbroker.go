// Package localbroker is boxctl's credential broker of one user: a
// process (`boxctl broker`) holding the model keys of the user's boxes in
// its memory only, that `boxctl up` starts on demand and that outlives
// the command. Its admin API (package broker's, on a unix socket of mode
// 0600 in a directory of mode 0700 beside the user's state) registers
// upstreams, serves the boxes of each vendor where they reach this
// machine, and issues and revokes box tokens; it ends by itself once no
// box has held a token for its idle time.
package localbroker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tangle-network/boxctl/provider/sandbox/broker"
	"github.com/tangle-network/boxctl/provider/sandbox/replica"
	"github.com/tangle-network/boxctl/vendors/egress/gate"
)

// DefaultIdle is how long the broker runs with no box holding a token.
const DefaultIdle = 10 * time.Minute

// Options configure Serve.
type Options struct {
	// Admin is the admin API's unix socket. Required unless AdminAddr is
	// set.
	Admin string
	// AdminAddr serves the admin API on TCP (host:port) too, behind
	// AdminTLS, which must take only clients with a certificate
	// (package brokertls): a broker in a cluster. Its gates API is not
	// served there: a relay runs where its boxes' network is.
	AdminAddr string
	AdminTLS  *tls.Config
	// BoxURL, when set, is the one URL the broker serves boxes at (a
	// Service in front of Listen's address): the admin API's listeners
	// answer it for any host.
	BoxURL string
	// Upstreams are registered at the start (a broker whose keys come
	// from its own environment).
	Upstreams []broker.Upstream
	// ReplicaDir keeps the boxes' events outside them (package replica),
	// past the broker's restarts; "" keeps none.
	ReplicaDir string
	// Idle ends the broker once no box has held a token this long (0:
	// never).
	Idle time.Duration
	// Logger receives refusals and failures, never a secret.
	Logger *slog.Logger
	// Listen are more addresses (host:port) to serve boxes on from the
	// start, such as one a tunnel exposes to a cloud vendor's boxes; with
	// TLSCert and TLSKey (PEM files) they serve HTTPS.
	Listen          []string
	TLSCert, TLSKey string
}

// Serve runs the broker until ctx ends or it was idle for o.Idle.
func Serve(ctx context.Context, o Options) error {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Admin == "" && o.AdminAddr == "" {
		return errors.New("broker: no admin API: want a unix socket, an address, or both")
	}
	if o.AdminAddr != "" && (o.AdminTLS == nil || o.AdminTLS.ClientAuth != tls.RequireAndVerifyClientCert || o.AdminTLS.ClientCAs == nil) {
		return errors.New("broker: an admin API on TCP takes only clients with a certificate of its CA")
	}
	if o.BoxURL != "" {
		if err := checkBoxURL(o.BoxURL); err != nil {
			return err
		}
	}
	if o.TLSCert != "" {
		if _, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey); err != nil {
			return fmt.Errorf("broker: --tls-cert: %w", err)
		}
	}
	var rep *replica.Store
	if o.ReplicaDir != "" {
		var err error
		if rep, err = replica.Open(ctx, o.ReplicaDir, replica.Options{}); err != nil {
			return fmt.Errorf("broker: %w", err)
		}
		defer rep.Close()
	}
	b, err := broker.New(broker.Options{Logger: o.Logger, Upstreams: o.Upstreams, Replica: rep})
	if err != nil {
		return err
	}
	s := &servers{b: b, fixed: o.BoxURL, rep: rep, log: o.Logger}
	var l net.Listener
	if o.Admin != "" {
		if l, err = listenAdmin(ctx, o.Admin); err != nil {
			return err
		}
	}
	// fail undoes the admin socket on a failure before serving.
	fail := func(err error) error {
		s.close()
		if l != nil {
			_ = l.Close()
			_ = os.Remove(o.Admin)
		}
		return fmt.Errorf("broker: %w", err)
	}
	for _, addr := range o.Listen {
		bl, err := net.Listen("tcp", addr)
		if err != nil {
			return fail(err)
		}
		srv := &http.Server{Handler: b, ReadHeaderTimeout: 30 * time.Second}
		s.srvs = append(s.srvs, srv)
		if o.TLSCert != "" {
			go func() { _ = srv.ServeTLS(bl, o.TLSCert, o.TLSKey) }()
		} else {
			go func() { _ = srv.Serve(bl) }()
		}
		o.Logger.Info("broker serving boxes", "addr", bl.Addr().String(), "tls", o.TLSCert != "")
	}
	// The egress gates of the boxes' confined networks live here too,
	// beside the broker they always let the boxes reach.
	gates := &gate.Gates{Defaults: gate.Options{Logger: o.Logger}}
	inner := http.NewServeMux()
	inner.Handle("/v1/gates/", gates.Handler())
	api := b.Admin(s.listen)
	inner.Handle("/", api)
	admin := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.lastAdmin.Store(time.Now().UnixNano()) // a caller at work keeps the broker up
		inner.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	if l != nil {
		go func() { _ = admin.Serve(l) }()
	}
	var remote *http.Server
	if o.AdminAddr != "" {
		tl, err := net.Listen("tcp", o.AdminAddr)
		if err != nil {
			_ = admin.Close()
			return fail(err)
		}
		remote = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.lastAdmin.Store(time.Now().UnixNano())
			api.ServeHTTP(w, r)
		}), ReadHeaderTimeout: 10 * time.Second, TLSConfig: o.AdminTLS.Clone(),
			ErrorLog: slog.NewLogLogger(o.Logger.Handler(), slog.LevelDebug)}
		go func() { _ = remote.ServeTLS(tl, "", "") }()
		o.Logger.Info("broker admin API", "addr", tl.Addr().String(), "tls", "mutual")
	}
	defer func() {
		_ = admin.Close()
		if remote != nil {
			_ = remote.Close()
		}
		s.close()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		_ = gates.Close(cctx)
		cancel()
		if o.Admin != "" {
			_ = os.Remove(o.Admin)
		}
	}()
	o.Logger.Info("broker serving", "admin", o.Admin)
	return s.untilIdle(ctx, o.Idle, o.Admin)
}

// listenAdmin listens on the admin socket at path, in a directory of mode
// 0700, the socket itself of mode 0600; a live broker there is an error.
func listenAdmin(ctx context.Context, path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	if err := os.Chmod(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	if answers(ctx, path) {
		return nil, fmt.Errorf("broker: another broker answers at %s", path)
	}
	_ = os.Remove(path) // a dead broker's
	old := syscall.Umask(0o177)
	l, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	return l, nil
}

// checkBoxURL refuses a box URL that is not http(s)://host[:port].
func checkBoxURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil || (u.Path != "" && u.Path != "/") {
		return fmt.Errorf("broker: box URL %q: want http(s)://host:port (in a cluster, its Service's address)", raw)
	}
	return nil
}

// servers are the broker's listeners for boxes, one per host address.
type servers struct {
	b     *broker.Broker
	fixed string         // Options.BoxURL
	rep   *replica.Store // pruned while the broker idles, if any
	log   *slog.Logger
	mu    sync.Mutex
	byURL map[string]string // host -> URL
	srvs  []*http.Server
	// lastAdmin is when the admin API last answered (unix ns).
	lastAdmin atomic.Int64
}

func (s *servers) listen(ctx context.Context, host string) (string, error) {
	if s.fixed != "" {
		return s.fixed, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if u, ok := s.byURL[host]; ok {
		return u, nil
	}
	if net.ParseIP(host) == nil {
		return "", fmt.Errorf("listen: %q is not an IP address", host)
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("listen on %s: %w", host, err)
	}
	srv := &http.Server{Handler: s.b, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = srv.Serve(l) }()
	if s.byURL == nil {
		s.byURL = map[string]string{}
	}
	u := "http://" + l.Addr().String()
	s.byURL[host], s.srvs = u, append(s.srvs, srv)
	return u, nil
}

func (s *servers) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, srv := range s.srvs {
		_ = srv.Close()
	}
}

// untilIdle returns when ctx ends, once no box held a token and no caller
// used the admin API for idle (a create in progress pings it: see
// KeepAwake), or
// once the admin socket is gone (its state directory was removed: no
// caller can reach the broker any more).
func (s *servers) untilIdle(ctx context.Context, idle time.Duration, admin string) error {
	every := 10 * time.Second
	if idle > 0 {
		every = min(idle/10, every)
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if _, err := os.Stat(admin); admin != "" && err != nil {
			return nil
		}
		if s.rep != nil {
			if n, err := s.rep.Prune(ctx); err != nil || n > 0 {
				s.log.Debug("replica pruned", "runs", n, "err", err)
			}
		}
		if idle <= 0 {
			continue
		}
		if s.b.Live() > 0 || time.Since(time.Unix(0, s.lastAdmin.Load())) < idle {
			last = time.Now()
		} else if time.Since(last) >= idle {
			return nil
		}
	}
}

// KeepAwakeEvery is how often KeepAwake reaches the broker: well within
// any idle time a user sets (a minute at least is sensible).
const KeepAwakeEvery = 5 * time.Second

// KeepAwake keeps the broker from ending for idleness while a caller works
// towards a grant (a box create can take longer than the idle time, an
// image pull say): it asks the broker's status every period (callers:
// KeepAwakeEvery) until stop is called.
func KeepAwake(ctx context.Context, g broker.Granter, every time.Duration) (stop func()) {
	c, ok := g.(*broker.Client)
	if !ok {
		return func() {} // a broker of this process's own does not idle out
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_, _ = c.Status(ctx)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// answers reports whether a broker answers on the admin socket.
func answers(ctx context.Context, sock string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := broker.Dial(sock).Status(ctx)
	return err == nil
}

// StartTimeout bounds Ensure's wait for a broker it started.
const StartTimeout = 15 * time.Second

// Ensure returns a client of the broker at sock, starting `exe broker
// --admin sock --idle idle` detached, its output in logPath, when none
// answers there.
func Ensure(ctx context.Context, exe, sock, logPath string, idle time.Duration) (*broker.Client, error) {
	if answers(ctx, sock) {
		return broker.Dial(sock), nil
	}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o700); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(exe, "broker", "--admin", sock, "--idle", idle.String())
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if answers(ctx, sock) {
			return broker.Dial(sock), nil
		}
		select {
		case err := <-exited:
			if answers(context.WithoutCancel(ctx), sock) { // another up started one first
				return broker.Dial(sock), nil
			}
			return nil, fmt.Errorf("broker exited (%v); its log: %s", err, logPath)
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			return nil, errors.Join(fmt.Errorf("broker did not answer within %v", StartTimeout), context.Cause(ctx))
		case <-tick.C:
		}
	}
}
