package daytona_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tangle-network/boxctl/internal/jssdk"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/daytona"
	"github.com/tangle-network/boxctl/vendors/daytona/daytonaemu"
	"github.com/tangle-network/boxctl/vendors/vendortest"
)

// route is one operation of a generated API client: its method, path
// template and whether it is marked deprecated.
type route struct {
	Method, Path string
	Deprecated   bool
	re           *regexp.Regexp
}

var (
	opPath     = regexp.MustCompile("const localVarPath = `([^`]*)`")
	opMethod   = regexp.MustCompile(`method: '([A-Z]+)'`)
	pathParams = regexp.MustCompile(`\\\{[^}]*\}`)
)

// readRoutes reads the route table of an installed OpenAPI Generator
// (typescript-axios) client package: every operation's localVarPath,
// the method its request options name, and a @deprecated mark in its
// doc comment (the text since the operation before it).
func readRoutes(t *testing.T, pkgDir string) []route {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(pkgDir, "src", "api", "*-api.js"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no generated API files under %s (%v)", pkgDir, err)
	}
	var out []route
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := string(src)
		locs := opPath.FindAllStringSubmatchIndex(s, -1)
		prev := 0
		for _, loc := range locs {
			p := s[loc[2]:loc[3]]
			m := opMethod.FindStringSubmatch(s[loc[1]:])
			if m == nil {
				t.Fatalf("%s: no method after %s", f, p)
			}
			doc := s[prev:loc[0]]
			if i := opMethod.FindAllStringIndex(doc, -1); len(i) > 0 {
				doc = doc[i[len(i)-1][1]:]
			}
			re := regexp.MustCompile("^" + pathParams.ReplaceAllString(regexp.QuoteMeta(p), `[^/]+`) + "$")
			out = append(out, route{Method: m[1], Path: p, Deprecated: strings.Contains(doc, "@deprecated"), re: re})
			prev = loc[1]
		}
	}
	return out
}

// check returns why method path is not a current route of table: absent
// or deprecated. A path matching several templates is current when any
// of them is.
func check(table []route, pkg, method, path string) string {
	var deprecated []string
	for _, r := range table {
		if r.Method != method || !r.re.MatchString(path) {
			continue
		}
		if !r.Deprecated {
			return ""
		}
		deprecated = append(deprecated, r.Path)
	}
	if len(deprecated) > 0 {
		return fmt.Sprintf("%s %s is deprecated in %s (%s)", method, path, pkg, strings.Join(deprecated, ", "))
	}
	return fmt.Sprintf("%s %s is not a route of %s", method, path, pkg)
}

// recorder records the method and path of every request it carries.
type recorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen map[string]bool // "METHOD path"
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.seen[req.Method+" "+req.URL.Host+req.URL.Path] = true
	r.mu.Unlock()
	return r.next.RoundTrip(req)
}

// TestRoutes_Current runs the client through everything it does (the
// vendor suite, a fork, a snapshot import) against the emulator, records every
// call, and checks each against the route tables of the API clients the
// pinned official SDK bundles (@daytona/api-client for the control plane,
// @daytona/toolbox-api-client for the toolbox): a call of a route those
// do not list, or mark deprecated, fails.
func TestRoutes_Current(t *testing.T) {
	in := jssdk.Require(t, "daytona")
	tables := map[string][]route{}
	for _, pkg := range []string{"@daytona/api-client", "@daytona/toolbox-api-client"} {
		tables[pkg] = readRoutes(t, filepath.Join(in.Dir, "node_modules", pkg))
	}
	if len(tables["@daytona/api-client"]) < 50 || len(tables["@daytona/toolbox-api-client"]) < 50 {
		t.Fatalf("route tables too small: %d control plane, %d toolbox routes", len(tables["@daytona/api-client"]),
			len(tables["@daytona/toolbox-api-client"]))
	}
	rec := &recorder{next: http.DefaultTransport.(*http.Transport).Clone(), seen: map[string]bool{}}
	emu, v := emulator(t, daytonaemu.Options{}, daytona.WithHTTPClient(&http.Client{Transport: rec}))
	t.Run("suite", func(t *testing.T) {
		vendortest.Run(t, vendortest.Config{Vendor: v, Image: snapshotName, Describe: describe(emu)})
	})
	t.Run("fork", func(t *testing.T) { forkOnce(t, emu, v) })
	t.Run("import", func(t *testing.T) {
		ref, _, err := v.PushTarget(t.Context(), "boxctl/routes-"+vendortest.RunTag(t), "v1")
		if err != nil {
			t.Fatal(err)
		}
		push(t, ref)
		repo := strings.TrimSuffix(ref[strings.LastIndex(ref, "/")+1:], ":v1")
		if _, err := v.ImportImage(t.Context(), vendors.ImportRequest{Image: ref, Name: "boxctl/" + repo, Tag: "v1"}); err != nil {
			t.Fatal(err)
		}
	})

	host := strings.TrimPrefix(emu.URL(), "http://")
	var calls, bad []string
	for call := range rec.seen {
		method, hp, _ := strings.Cut(call, " ")
		p, ok := strings.CutPrefix(hp, host)
		if !ok {
			continue // a box's endpoint, not the vendor's API
		}
		calls = append(calls, call)
		var why string
		switch {
		case strings.HasPrefix(p, "/api/"):
			why = check(tables["@daytona/api-client"], "@daytona/api-client 0.218.0", method, strings.TrimPrefix(p, "/api"))
		case strings.HasPrefix(p, "/toolbox/"):
			_, rest, _ := strings.Cut(strings.TrimPrefix(p, "/toolbox/"), "/")
			why = check(tables["@daytona/toolbox-api-client"], "@daytona/toolbox-api-client 0.218.0", method, "/"+rest)
		default:
			why = method + " " + p + " is under neither the control plane (/api) nor the toolbox proxy (/toolbox)"
		}
		if why != "" {
			bad = append(bad, why)
		}
	}
	slices.Sort(calls)
	t.Logf("%d distinct calls checked:\n%s", len(calls), strings.Join(calls, "\n"))
	if len(calls) < 15 {
		t.Errorf("only %d distinct calls recorded; the scenario did not run", len(calls))
	}
	slices.Sort(bad)
	for _, b := range bad {
		t.Errorf("the client calls a route that is not current: %s", b)
	}
}

// TestReadRoutes checks the route table reader on the generator's shape:
// paths with parameters, methods, and deprecation marks that belong to
// the operation they precede.
func TestReadRoutes(t *testing.T) {
	dir := t.TempDir()
	src := "const X = function (configuration) {\n    return {\n" +
		"        /**\n         * Old\n         * @deprecated\n         */\n" +
		"        old: async (id, options = {}) => {\n            const localVarPath = `/box/{boxId}/old`\n" +
		"                .replace(`{boxId}`, encodeURIComponent(String(id)));\n" +
		"            const localVarRequestOptions = { method: 'GET', ...baseOptions, ...options };\n        },\n" +
		"        /**\n         * New\n         */\n" +
		"        current: async (options = {}) => {\n            const localVarPath = `/box`;\n" +
		"            const localVarRequestOptions = { method: 'POST', ...baseOptions, ...options };\n        },\n" +
		"    };\n};\n/**\n * @deprecated in the class section, after every operation\n */\n"
	if err := os.MkdirAll(filepath.Join(dir, "src", "api"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "src", "api", "box-api.js"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	table := readRoutes(t, dir)
	tests := []struct {
		method, path, want string
	}{
		{"POST", "/box", ""},
		{"GET", "/box/abc/old", "GET /box/abc/old is deprecated in pkg (/box/{boxId}/old)"},
		{"GET", "/box", "GET /box is not a route of pkg"},
		{"GET", "/box/a/b/old", "GET /box/a/b/old is not a route of pkg"},
	}
	for _, tt := range tests {
		if got := check(table, "pkg", tt.method, tt.path); got != tt.want {
			t.Errorf("check(%s %s) = %q, want %q", tt.method, tt.path, got, tt.want)
		}
	}
}
