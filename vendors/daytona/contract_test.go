package daytona_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/daytona"
)

// The contract tests replay request/response pairs taken from Daytona's
// published documents (libs/api-client-go/api/openapi.yaml and
// libs/toolbox-api-client-go/api/openapi.yaml, v0.190.0: their paths,
// status codes, schemas and examples, and the services' error bodies),
// kept in testdata/contract: each file is one client operation's whole
// conversation, in order. A request must match its recorded method, path,
// query and the recorded fields of its JSON body ("<any>" matches any
// value, and any path segment); the recorded answer is sent back, with
// {{server}} standing for the replaying server's URL. A drift of the
// client from the documents fails here without an emulator.

type exchange struct {
	Request struct {
		Method  string            `json:"method"`
		Path    string            `json:"path"`
		Query   map[string]string `json:"query"`
		Headers map[string]string `json:"headers"`
		Body    json.RawMessage   `json:"body"`
	} `json:"request"`
	Response struct {
		Status  int               `json:"status"`
		Headers map[string]string `json:"headers"`
		Body    json.RawMessage   `json:"body"`
	} `json:"response"`
}

type conversation struct {
	Spec      string     `json:"spec"`
	Exchanges []exchange `json:"exchanges"`
}

// replay serves the conversation in file and returns a client of it; at
// the end of t every exchange must have happened.
func replay(t *testing.T, file string) *daytona.Vendor {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "contract", file+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var c conversation
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	next := 0
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		body, _ := io.ReadAll(r.Body)
		if next >= len(c.Exchanges) {
			t.Errorf("%s: unexpected request %s %s (all %d exchanges done)", file, r.Method, r.URL, len(c.Exchanges))
			w.WriteHeader(http.StatusTeapot)
			return
		}
		ex := c.Exchanges[next]
		next++
		if why := mismatch(ex, r, body); why != "" {
			t.Errorf("%s: request %d %s %s: %s", file, next, r.Method, r.URL, why)
			w.WriteHeader(http.StatusTeapot)
			return
		}
		for k, v := range ex.Response.Headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(ex.Response.Status)
		_, _ = w.Write(bytes.ReplaceAll(ex.Response.Body, []byte("{{server}}"), []byte(srv.URL)))
	}))
	t.Cleanup(func() {
		srv.Close()
		mu.Lock()
		defer mu.Unlock()
		if next != len(c.Exchanges) {
			t.Errorf("%s: %d of %d exchanges happened", file, next, len(c.Exchanges))
		}
	})
	v, err := daytona.New("dtn_contract", daytona.WithAPIURL(srv.URL+"/api"), daytona.WithPollInterval(time.Millisecond),
		daytona.WithRetry(2, time.Millisecond, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func mismatch(ex exchange, r *http.Request, body []byte) string {
	want := ex.Request
	if r.Method != want.Method || !matchPath(want.Path, r.URL.Path) {
		return "want " + want.Method + " " + want.Path
	}
	for k, v := range want.Query {
		if got := r.URL.Query().Get(k); got != v && !(v == "<any>" && got != "") {
			return "query " + k + " = " + got + ", want " + v
		}
	}
	for k, v := range want.Headers {
		if r.Header.Get(k) != v {
			return "header " + k + " is not as recorded"
		}
	}
	if len(want.Body) > 0 {
		var w, g any
		if err := json.Unmarshal(want.Body, &w); err != nil {
			return "recorded body: " + err.Error()
		}
		if err := json.Unmarshal(body, &g); err != nil {
			return "body is not JSON: " + string(body)
		}
		if why := matchJSON("body", w, g); why != "" {
			return why
		}
	}
	return ""
}

func matchPath(want, got string) bool {
	w, g := strings.Split(want, "/"), strings.Split(got, "/")
	return len(w) == len(g) && !slices.ContainsFunc(w, func(s string) bool {
		i := slices.Index(w, s)
		return s != "<any>" && s != g[i]
	})
}

// matchJSON reports how got differs from the recorded want: every field
// want has, got must have alike.
func matchJSON(at string, want, got any) string {
	if want == "<any>" {
		if got == nil {
			return at + " is missing"
		}
		return ""
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return at + " is not an object"
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				return at + "." + k + " is missing"
			}
			if why := matchJSON(at+"."+k, wv, gv); why != "" {
				return why
			}
		}
		return ""
	}
	if !reflect.DeepEqual(want, got) {
		b, _ := json.Marshal(got)
		return at + " = " + string(b)
	}
	return ""
}

var contractSpec = vendors.CreateSpec{Image: "box", Lifetime: 10 * time.Minute, RunTag: "ct-run", Ports: []int{3000}}

func TestContract(t *testing.T) {
	var statusOf = func(err error) int {
		var ae *daytona.APIError
		if errors.As(err, &ae) {
			return ae.Status
		}
		return 0
	}
	tests := []struct {
		file string
		run  func(t *testing.T, v *daytona.Vendor)
	}{
		{"create_started", func(t *testing.T, v *daytona.Vendor) {
			b, err := v.Create(t.Context(), contractSpec)
			if err != nil || b.ID() != "sandbox123" {
				t.Fatalf("Create = %v, %v; want sandbox123", b, err)
			}
		}},
		{"create_build_failed", func(t *testing.T, v *daytona.Vendor) {
			_, err := v.Create(t.Context(), contractSpec)
			var ce *daytona.CreateError
			if !errors.As(err, &ce) || ce.State != "build_failed" || !strings.Contains(ce.Reason, "exit code 1") {
				t.Fatalf("Create = %v, want a *CreateError with the build's reason", err)
			}
		}},
		{"create_throttled", func(t *testing.T, v *daytona.Vendor) {
			if _, err := v.Create(t.Context(), contractSpec); err != nil {
				t.Fatalf("Create after a 429 = %v", err)
			}
		}},
		{"create_lost_answer", func(t *testing.T, v *daytona.Vendor) {
			if b, err := v.Create(t.Context(), contractSpec); err != nil || b.ID() != "sandbox123" {
				t.Fatalf("Create = %v, %v; want the sandbox the lost answer made", b, err)
			}
		}},
		{"create_over_quota", func(t *testing.T, v *daytona.Vendor) {
			_, err := v.Create(t.Context(), contractSpec)
			var rl *vendors.RateLimitError
			if !errors.As(err, &rl) || !rl.Quota || !errors.Is(err, vendors.ErrRateLimited) || statusOf(err) != 400 {
				t.Fatalf("Create = %v, want a quota *RateLimitError with the 400", err)
			}
		}},
		{"list_paged", func(t *testing.T, v *daytona.Vendor) {
			l, err := v.List(t.Context(), map[string]string{"io.github.tangle-network.boxctl.box.run": "ct-run"})
			if err != nil || len(l) != 2 || l[0].ID != "sandbox1" || l[1].ID != "sandbox2" ||
				l[0].State != vendors.StateRunning || l[1].State != vendors.StateStopped || l[0].Deadline.Unix() != 1893456000 {
				t.Fatalf("List = %+v, %v; want sandbox1 running and sandbox2 stopped, not the one being deleted", l, err)
			}
		}},
		{"list_legacy_array", func(t *testing.T, v *daytona.Vendor) {
			l, err := v.List(t.Context(), map[string]string{"io.github.tangle-network.boxctl.box.run": "ct-run"})
			if err != nil || len(l) != 2 || l[1].State != vendors.StateCreating {
				t.Fatalf("List = %+v, %v; want both sandboxes of the array", l, err)
			}
		}},
		{"connect_not_found", func(t *testing.T, v *daytona.Vendor) {
			_, err := v.Connect(t.Context(), "nope")
			var ae *daytona.APIError
			if !errors.Is(err, vendors.ErrNotFound) || !errors.As(err, &ae) || ae.Code != "Not Found" ||
				ae.Message != "Sandbox with ID or name nope not found" || ae.Path != "/api/sandbox/nope" {
				t.Fatalf("Connect = %#v, want ErrNotFound with the error body", err)
			}
		}},
		{"destroy_state_change", func(t *testing.T, v *daytona.Vendor) {
			b, err := v.Connect(t.Context(), "sandbox123")
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Destroy(t.Context()); err != nil {
				t.Fatalf("Destroy = %v", err)
			}
		}},
		{"endpoint_preview", func(t *testing.T, v *daytona.Vendor) {
			b, err := v.Connect(t.Context(), "sandbox123")
			if err != nil {
				t.Fatal(err)
			}
			ep, err := b.Endpoint(t.Context(), 3000)
			if err != nil || ep.URL != "https://3000-sandbox123.proxy.daytona.works" ||
				ep.Header.Get("x-daytona-preview-token") != "ul67qtv-jl6wb9z5o3eii-ljqt9qed6l" || ep.Transport == nil {
				t.Fatalf("Endpoint = %+v, %v", ep, err)
			}
			if _, err := b.Endpoint(t.Context(), 4000); err == nil {
				t.Error("Endpoint(port not exposed) succeeded")
			}
		}},
		{"process_logs", func(t *testing.T, v *daytona.Vendor) {
			b, err := v.Connect(t.Context(), "sandbox123")
			if err != nil {
				t.Fatal(err)
			}
			p, err := b.Process(t.Context(), "box-bridge")
			if err != nil {
				t.Fatal(err)
			}
			out, errOut, err := p.Logs(t.Context())
			if err != nil || string(out) != "ready\n" || string(errOut) != "warn\n" {
				t.Errorf("Logs = %q %q %v", out, errOut, err)
			}
			if code, err := p.Wait(t.Context()); err != nil || code != 3 {
				t.Errorf("Wait = %d, %v; want 3", code, err)
			}
		}},
		{"toolbox_session_missing", func(t *testing.T, v *daytona.Vendor) {
			b, err := v.Connect(t.Context(), "sandbox123")
			if err != nil {
				t.Fatal(err)
			}
			_, err = b.Process(t.Context(), "nope")
			var ae *daytona.APIError
			if !errors.As(err, &ae) || ae.Status != 404 || ae.Code != "NOT_FOUND" || errors.Is(err, vendors.ErrNotFound) {
				t.Fatalf("Process(missing) = %v, want the toolbox's 404, not a missing box", err)
			}
		}},
		{"snapshot_import", func(t *testing.T, v *daytona.Vendor) {
			ref, creds, err := v.PushTarget(t.Context(), "boxctl/box", "v1")
			if err != nil || ref != "registry.daytona.io/project/box:v1" || creds.Username != "robot$push" || creds.Password != "s3cret" {
				t.Fatalf("PushTarget = %s %v %v", ref, creds, err)
			}
			var lines []string
			img, err := v.ImportImage(t.Context(), vendors.ImportRequest{Image: ref, Name: "boxctl/box", Tag: "v1", Pull: creds,
				Progress: func(l string) { lines = append(lines, l) }})
			if err != nil || img.Reference != "box-v1" || img.Kind != "snapshot" {
				t.Fatalf("ImportImage = %+v, %v", img, err)
			}
			if want := []string{"snapshot box-v1 is pulling", "snapshot box-v1 is active"}; !slices.Equal(lines, want) {
				t.Errorf("progress = %q, want %q", lines, want)
			}
		}},
		{"snapshot_failed", func(t *testing.T, v *daytona.Vendor) {
			img, err := v.ImportImage(t.Context(), vendors.ImportRequest{Image: "registry.daytona.io/project/box:v1", Name: "box", Tag: "v1"})
			var fe *daytona.SnapshotFailedError
			if !errors.As(err, &fe) || fe.State != "error" || !strings.Contains(fe.Reason, "manifest unknown") || img.Reference != "box-v1" {
				t.Fatalf("ImportImage = %+v, %v; want a *SnapshotFailedError naming the snapshot", img, err)
			}
		}},
		{"snapshot_latest_refused", func(t *testing.T, v *daytona.Vendor) {
			_, err := v.ImportImage(t.Context(), vendors.ImportRequest{Image: "registry.daytona.io/project/box:latest", Name: "box", Tag: "latest"})
			if statusOf(err) != 400 || !strings.Contains(err.Error(), ":latest") {
				t.Fatalf("ImportImage(:latest) = %v, want the 400", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			tt.run(t, replay(t, tt.file))
		})
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "contract", "*.json"))
	if len(files) != len(tests) {
		t.Errorf("%d contract files, %d tests: every file needs its test", len(files), len(tests))
	}
}
