package e2b_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/vendors/e2b"
)

// The contract tests replay request/response pairs taken from E2B's
// published specs (spec/openapi.yml, spec/envd/envd.yaml, process.proto)
// in testdata/contract: each file is one scenario, the requests the
// client must send and the answers the spec says the services give. A
// change in what the client sends (a path, a field name, a header), or
// in how it reads an answer, fails here without any emulator.
//
// In a golden request, a string "{{any}}" matches any value, and
// "{{any}}" inside a longer string any run of characters; objects must
// have exactly the golden's members.

type exchange struct {
	Request struct {
		Method string            `json:"method"`
		Host   string            `json:"host"`
		Path   string            `json:"path"`
		Query  map[string]string `json:"query,omitempty"`
		Header map[string]string `json:"header,omitempty"`
		JSON   json.RawMessage   `json:"json,omitempty"`
		// Envelope is the single message of a streaming call.
		Envelope json.RawMessage `json:"envelope,omitempty"`
		Body     *string         `json:"body,omitempty"`
	} `json:"request"`
	Response struct {
		Status    int               `json:"status"`
		Header    map[string]string `json:"header,omitempty"`
		JSON      json.RawMessage   `json:"json,omitempty"`
		Body      string            `json:"body,omitempty"`
		Envelopes []struct {
			Flags byte            `json:"flags"`
			JSON  json.RawMessage `json:"json"`
		} `json:"envelopes,omitempty"`
	} `json:"response"`
}

type scenario struct {
	Spec      string     `json:"spec"`
	Exchanges []exchange `json:"exchanges"`
}

// replay serves a scenario's answers in order, failing t on any request
// that is not the next one of the scenario, and at the end on any left.
type replay struct {
	t    *testing.T
	name string
	mu   sync.Mutex
	sc   scenario
	next int
}

func newReplay(t *testing.T, name string) (*replay, *e2b.Vendor) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "contract", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	r := &replay{t: t, name: name}
	if err := json.Unmarshal(raw, &r.sc); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	srv := httptest.NewServer(r)
	t.Cleanup(func() {
		srv.Close()
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.next != len(r.sc.Exchanges) {
			t.Errorf("%s: the client made %d of the %d requests; next missing: %s %s", name, r.next, len(r.sc.Exchanges),
				r.sc.Exchanges[r.next].Request.Method, r.sc.Exchanges[r.next].Request.Path)
		}
	})
	v, err := e2b.New("e2b_contract", e2b.WithDial(srv.Listener.Addr().String()), e2b.WithScheme("http"),
		e2b.WithRetry(2, time.Millisecond, 5*time.Millisecond), e2b.WithPollInterval(time.Millisecond),
		e2b.WithVersion("1.2.3"))
	if err != nil {
		t.Fatal(err)
	}
	return r, v
}

func (r *replay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	body, _ := io.ReadAll(req.Body)
	if r.next >= len(r.sc.Exchanges) {
		r.t.Errorf("%s: unexpected request %s %s%s", r.name, req.Method, req.Host, req.URL)
		http.Error(w, "unexpected", http.StatusTeapot)
		return
	}
	ex := r.sc.Exchanges[r.next]
	r.next++
	if rt, err := sdkRoutes(); err != nil {
		r.t.Errorf("route table of the pinned SDK: %v", err)
	} else if err := rt.check(req.Method, strings.ToLower(req.Host), req.URL.Path); err != nil {
		r.t.Errorf("%s: request %d: the client calls a route the pinned SDK does not have current: %v", r.name, r.next, err)
	}
	if diffs := r.check(ex, req, body); len(diffs) > 0 {
		r.t.Errorf("%s: request %d (%s %s) differs from the contract:\n  %s", r.name, r.next, ex.Request.Method, ex.Request.Path, strings.Join(diffs, "\n  "))
	}
	for k, v := range ex.Response.Header {
		w.Header().Set(k, v)
	}
	switch {
	case ex.Response.JSON != nil:
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(ex.Response.Status)
		_, _ = w.Write(ex.Response.JSON)
	case ex.Response.Envelopes != nil:
		w.Header().Set("Content-Type", "application/connect+json")
		w.WriteHeader(ex.Response.Status)
		for _, e := range ex.Response.Envelopes {
			var msg bytes.Buffer
			_ = json.Compact(&msg, e.JSON)
			var hdr [5]byte
			hdr[0] = e.Flags
			binary.BigEndian.PutUint32(hdr[1:], uint32(msg.Len()))
			_, _ = w.Write(append(hdr[:], msg.Bytes()...))
		}
	default:
		w.WriteHeader(ex.Response.Status)
		_, _ = io.WriteString(w, ex.Response.Body)
	}
}

// check compares a request with the contract's.
func (r *replay) check(ex exchange, req *http.Request, body []byte) []string {
	var diffs []string
	want := ex.Request
	if req.Method != want.Method {
		diffs = append(diffs, fmt.Sprintf("method %s, want %s", req.Method, want.Method))
	}
	host := req.Host
	if i := strings.LastIndex(host, ":"); i >= 0 {
		host = host[:i]
	}
	if want.Host != "" && !matchString(want.Host, host) {
		diffs = append(diffs, fmt.Sprintf("host %s, want %s", host, want.Host))
	}
	if req.URL.Path != want.Path {
		diffs = append(diffs, fmt.Sprintf("path %s, want %s", req.URL.Path, want.Path))
	}
	q := req.URL.Query()
	keys := map[string]bool{}
	for k := range q {
		keys[k] = true
	}
	for k := range want.Query {
		keys[k] = true
	}
	for _, k := range sortedKeys(keys) {
		if w, ok := want.Query[k]; !ok || !q.Has(k) || !matchString(w, q.Get(k)) {
			diffs = append(diffs, fmt.Sprintf("query %s=%q, want %q", k, q.Get(k), want.Query[k]))
		}
	}
	for k, v := range want.Header {
		if got := req.Header.Get(k); !matchString(v, got) {
			diffs = append(diffs, fmt.Sprintf("header %s: %q, want %q", k, got, v))
		}
	}
	switch {
	case want.JSON != nil:
		diffs = append(diffs, matchJSON("body", want.JSON, body)...)
	case want.Envelope != nil:
		if len(body) < 5 || body[0] != 0 || int(binary.BigEndian.Uint32(body[1:5])) != len(body)-5 {
			diffs = append(diffs, fmt.Sprintf("body %q is not one uncompressed envelope", body))
		} else {
			diffs = append(diffs, matchJSON("envelope", want.Envelope, body[5:])...)
		}
	case want.Body != nil:
		if string(body) != *want.Body {
			diffs = append(diffs, fmt.Sprintf("body %q, want %q", body, *want.Body))
		}
	}
	return diffs
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// matchString matches a golden string with {{any}} wildcards.
func matchString(pattern, s string) bool {
	if !strings.Contains(pattern, "{{any}}") {
		return pattern == s
	}
	parts := strings.Split(pattern, "{{any}}")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$").MatchString(s)
}

func matchJSON(where string, want json.RawMessage, got []byte) []string {
	var w, g any
	if err := json.Unmarshal(want, &w); err != nil {
		return []string{where + ": bad golden: " + err.Error()}
	}
	if err := json.Unmarshal(got, &g); err != nil {
		return []string{fmt.Sprintf("%s %q is not JSON: %v", where, got, err)}
	}
	return matchValue(where, w, g)
}

func matchValue(at string, want, got any) []string {
	if s, ok := want.(string); ok && s == "{{any}}" {
		return nil
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s = %v, want an object", at, got)}
		}
		keys := map[string]bool{}
		for k := range w {
			keys[k] = true
		}
		for k := range g {
			keys[k] = true
		}
		var diffs []string
		for _, k := range sortedKeys(keys) {
			wv, wok := w[k]
			gv, gok := g[k]
			switch {
			case !gok:
				diffs = append(diffs, fmt.Sprintf("%s.%s missing, want %v", at, k, wv))
			case !wok:
				diffs = append(diffs, fmt.Sprintf("%s.%s = %v is not in the contract", at, k, gv))
			default:
				diffs = append(diffs, matchValue(at+"."+k, wv, gv)...)
			}
		}
		return diffs
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s = %v, want %v", at, got, want)}
		}
		var diffs []string
		for i := range w {
			diffs = append(diffs, matchValue(fmt.Sprintf("%s[%d]", at, i), w[i], g[i])...)
		}
		return diffs
	case string:
		if g, ok := got.(string); !ok || !matchString(w, g) {
			return []string{fmt.Sprintf("%s = %v, want %q", at, got, w)}
		}
		return nil
	}
	wb, _ := json.Marshal(want)
	gb, _ := json.Marshal(got)
	if !bytes.Equal(wb, gb) {
		return []string{fmt.Sprintf("%s = %s, want %s", at, gb, wb)}
	}
	return nil
}

// b64 is how protojson writes bytes.
func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
