package routerstub_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/internal/routerstub"
)

const testKey = "sk-test-key"

// newStub starts a stub accepting testKey with script.
func newStub(t *testing.T, script routerstub.Script) (*routerstub.Server, *httptest.Server) {
	t.Helper()
	return newStubWith(t, routerstub.Options{Script: script})
}

// newStubWith starts a stub configured by o that accepts testKey besides
// o's keys.
func newStubWith(t *testing.T, o routerstub.Options) (*routerstub.Server, *httptest.Server) {
	t.Helper()
	o.Keys = append([]string{testKey}, o.Keys...)
	srv, err := routerstub.New(o)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return srv, hs
}

// post sends body to path with the header-style key of the family.
func post(t *testing.T, hs *httptest.Server, path, body string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, hs.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if len(header) == 0 {
		if strings.Contains(path, "/messages") {
			header = []string{"X-Api-Key", testKey}
		} else {
			header = []string{"Authorization", "Bearer " + testKey}
		}
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// decode reads a JSON body into a generic map.
func decode(t *testing.T, resp *http.Response) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("decode body: %v", err)
	}
	return m
}

// sseEvent is one parsed server-sent event; Data is decoded JSON unless
// the data is not JSON (Raw keeps it).
type sseEvent struct {
	Name string
	Raw  string
	Data map[string]any
}

// readSSE parses an event stream to its end.
func readSSE(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	var events []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Raw != "" || cur.Name != "" {
				_ = json.Unmarshal([]byte(cur.Raw), &cur.Data)
				events = append(events, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.Raw = strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read SSE: %v", err)
	}
	return events
}

// names lists the events' names, or their data "type" when unnamed.
func names(events []sseEvent) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.Name
		if out[i] == "" {
			out[i], _ = e.Data["type"].(string)
		}
	}
	return out
}

// get walks a decoded JSON value by keys and indexes.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}
