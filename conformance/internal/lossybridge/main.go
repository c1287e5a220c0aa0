// Command lossybridge is a deliberately broken box-bridge for the
// conformance suite's own tests (their box images only, never a product
// image, and no product flag turns it on): it runs the
// real bridge (bridge.Serve, configured from the environment as
// box-bridge is) on a private loopback port and serves it on the
// configured address through a proxy that drops every other frame with an
// id from each replay (GET /v1/runs/:id/events and
// /v1/sessions/:id/events). Live streams pass unchanged, so a turn
// works; only a client that replays sees events missing.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/tangle-network/boxctl/bridge"
)

func main() {
	// As box-bridge does: no other process of the box's user may read the
	// bearer from this process's environment.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "lossybridge:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lossybridge:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg, err := bridge.ConfigFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	public := net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))
	cfg.Host, cfg.Port = "127.0.0.1", 0
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ready := make(chan string, 1)
	served := make(chan error, 1)
	go func() { served <- bridge.Serve(ctx, cfg, log, func(addr string) { ready <- addr }) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-served:
		return err
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: addr})
	proxy.FlushInterval = -1
	proxy.ModifyResponse = func(resp *http.Response) error {
		if isReplay(resp.Request) && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			resp.Body = dropEveryOther(resp.Body)
		}
		return nil
	}
	l, err := net.Listen("tcp", public)
	if err != nil {
		return err
	}
	log.Info("lossy proxy listening", "addr", l.Addr().String(), "bridge", addr)
	srv := &http.Server{Handler: proxy}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return <-served
}

// isReplay reports a replay request: the events of a run or a session.
func isReplay(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/events") &&
		(strings.HasPrefix(r.URL.Path, "/v1/runs/") || strings.HasPrefix(r.URL.Path, "/v1/sessions/"))
}

// dropEveryOther passes an SSE body through, leaving out the second,
// fourth, ... frame that carries an id.
func dropEveryOther(body io.ReadCloser) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		defer body.Close()
		rd := bufio.NewReader(body)
		var frame bytes.Buffer
		n := 0
		for {
			line, err := rd.ReadBytes('\n')
			frame.Write(line)
			if len(bytes.TrimRight(line, "\r\n")) == 0 || err != nil {
				keep := true
				if bytes.HasPrefix(frame.Bytes(), []byte("id:")) || bytes.Contains(frame.Bytes(), []byte("\nid:")) {
					n++
					keep = n%2 == 1
				}
				if keep {
					if _, werr := pw.Write(frame.Bytes()); werr != nil {
						return
					}
				}
				frame.Reset()
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
	}()
	return pr
}
