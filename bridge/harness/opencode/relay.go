package opencode

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// RelayArg is the first argument that makes the bridge's executable the
// stdio relay of an `opencode serve` process:
// `<exe> RelayArg OPENCODE [ARGS...]`.
const RelayArg = "__box-bridge-opencode-relay"

// ServeRelayIfAsked runs the relay and exits when this process was started
// as one (os.Args[1] is RelayArg); otherwise it returns at once. A main
// that serves the bridge calls it first.
func ServeRelayIfAsked() {
	if len(os.Args) > 1 && os.Args[1] == RelayArg {
		os.Exit(RunRelay(context.Background(), os.Args[2:], os.Stdin, os.Stdout))
	}
}

// Relay line types: what the relay prints besides the server's events
// (each an /event frame's JSON, and the served-model plugin's lines).
const (
	// ReadyType is printed once the event stream is connected; request
	// lines are read from then on.
	ReadyType = "boxctl.relay.ready"
	// ResponseType is an HTTP response to a request line.
	ResponseType = "boxctl.relay.response"
)

// relayRequest is a request line on the relay's stdin.
type relayRequest struct {
	ID     string          `json:"id"`
	Method string          `json:"method"`
	Path   string          `json:"path"`
	Body   json.RawMessage `json:"body,omitempty"`
}

// relayResponse is a response line on the relay's stdout.
type relayResponse struct {
	Type   string          `json:"type"`
	ID     string          `json:"id"`
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body,omitempty"`
	Error  string          `json:"failure,omitempty"`
}

// relayUser is the user name of the server's basic auth.
const relayUser = "opencode"

// RunRelay starts `opencode serve` on a free loopback port with a random
// password of its own (OPENCODE_SERVER_PASSWORD), prints each frame of
// its /event stream and each of its stdout lines (the plugin's) as a line
// on out, and turns each request line of in into an HTTP call to it,
// printing the response. It returns when the server exits (its status)
// or in ends (the server is then stopped).
func RunRelay(ctx context.Context, argv []string, in io.Reader, out io.Writer) int {
	if len(argv) < 1 {
		fmt.Fprintln(os.Stderr, "box-bridge opencode relay: want OPENCODE [ARGS...]")
		return 125
	}
	signal.Ignore(syscall.SIGHUP)
	port, err := freePort()
	if err != nil {
		fmt.Fprintln(os.Stderr, "box-bridge opencode relay:", err)
		return 125
	}
	pw := make([]byte, 24)
	rand.Read(pw)
	password := hex.EncodeToString(pw)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], append(argv[1:], "serve", "--hostname", "127.0.0.1", "--port", strconv.Itoa(port))...)
	cmd.Env = append(os.Environ(), "OPENCODE_SERVER_PASSWORD="+password, "OPENCODE_SERVER_USERNAME="+relayUser)
	cmd.Stderr = os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "box-bridge opencode relay:", err)
		return 125
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "box-bridge opencode relay:", err)
		return 127
	}
	w := &lineWriter{w: out}
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		once := sync.Once{}
		for sc.Scan() {
			l := sc.Bytes()
			if bytes.Contains(l, []byte("server listening on")) {
				once.Do(func() { close(listening) })
				continue
			}
			if json.Valid(l) {
				w.line(l)
			}
		}
	}()
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	r := &relay{base: base, password: password, out: w}
	go func() {
		select {
		case <-listening:
		case <-ctx.Done():
			return
		}
		if err := r.events(ctx); err != nil && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, "box-bridge opencode relay: events:", err)
			cancel()
			return
		}
	}()
	go func() {
		<-r.readyCh()
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			var req relayRequest
			if json.Unmarshal(sc.Bytes(), &req) != nil || req.Method == "" || !strings.HasPrefix(req.Path, "/") {
				continue
			}
			r.call(ctx, req)
		}
		cancel()
	}()
	err = cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	default:
		return 1
	}
}

// freePort returns a loopback port nothing listens on.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// lineWriter writes whole lines to w, one at a time.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) line(b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w.Write(append(bytes.Clone(b), '\n'))
}

type relay struct {
	base, password string
	out            *lineWriter
	once           sync.Once
	ready          chan struct{}
	mu             sync.Mutex
}

func (r *relay) readyCh() chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ready == nil {
		r.ready = make(chan struct{})
	}
	return r.ready
}

func (r *relay) request(ctx context.Context, method, path string, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(relayUser, r.password)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// events prints the frames of GET /event, and the ready line after the
// first.
func (r *relay) events(ctx context.Context) error {
	var resp *http.Response
	for attempt := 0; ; attempt++ {
		req, err := r.request(ctx, http.MethodGet, "/event", nil)
		if err != nil {
			return err
		}
		req.Header.Set("Accept", "text/event-stream")
		resp, err = http.DefaultClient.Do(req)
		if err == nil && resp.StatusCode == http.StatusOK {
			break
		}
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("GET /event: %s", resp.Status)
		}
		if attempt >= 50 {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimSpace(data)
		if !json.Valid(data) {
			continue
		}
		r.out.line(data)
		r.once.Do(func() {
			r.out.line([]byte(`{"type":"` + ReadyType + `"}`))
			close(r.readyCh())
		})
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF
}

// call makes one request and prints its response.
func (r *relay) call(ctx context.Context, rq relayRequest) {
	res := relayResponse{Type: ResponseType, ID: rq.ID}
	var body []byte
	if len(rq.Body) > 0 {
		body = rq.Body
	}
	req, err := r.request(ctx, rq.Method, rq.Path, body)
	if err == nil {
		var resp *http.Response
		if resp, err = http.DefaultClient.Do(req); err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
			resp.Body.Close()
			res.Status = resp.StatusCode
			if json.Valid(b) && len(bytes.TrimSpace(b)) > 0 {
				res.Body = b
			} else if len(b) > 0 {
				res.Body, _ = json.Marshal(string(b))
			}
		}
	}
	if err != nil {
		res.Error = err.Error()
	}
	b, err := json.Marshal(res)
	if err != nil {
		return
	}
	r.out.line(b)
}
