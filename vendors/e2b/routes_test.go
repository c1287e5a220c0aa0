package e2b_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/tangle-network/boxctl/internal/jssdk"
	"github.com/tangle-network/boxctl/internal/testbed"
)

// The route check: every request the client sends in the contract
// scenarios must be a route of the pinned official SDK (npm e2b, set
// "e2b" of internal/jssdk) that its bundled API description does not mark
// deprecated: the control plane's and envd's HTTP paths from the SDK's
// generated OpenAPI types, envd's Connect methods from the file
// descriptors of its protos.

type route struct {
	method, path string
	re           *regexp.Regexp
	deprecated   bool
}

// routeTable is what the pinned SDK knows of E2B's routes.
type routeTable struct {
	sdk      string
	api      []route // the control plane (spec/openapi.yml)
	envd     []route // envd's HTTP API (spec/envd/envd.yaml)
	services map[string]bool
}

var sdkRoutes = sync.OnceValues(func() (*routeTable, error) {
	env, err := testbed.Load()
	if err != nil {
		return nil, err
	}
	s, err := jssdk.Load("e2b")
	if err != nil {
		return nil, err
	}
	in, err := jssdk.Ensure(context.Background(), jssdk.TestbedOptions(env), s)
	if err != nil {
		return nil, err
	}
	return readRoutes(filepath.Join(in.Dir, "node_modules", "e2b"), "e2b@"+s.Dependencies["e2b"].Version)
})

// readRoutes reads the route tables of the SDK package in dir.
func readRoutes(dir, sdk string) (*routeTable, error) {
	t := &routeTable{sdk: sdk, services: map[string]bool{}}
	types, err := os.Open(filepath.Join(dir, "dist", "index.d.ts"))
	if err != nil {
		return nil, err
	}
	defer types.Close()
	var (
		table      *[]route
		path       string
		deprecated bool
		pathLine   = regexp.MustCompile(`^  "(/[^"]*)": \{$`)
		method     = regexp.MustCompile(`^    (get|put|post|delete|patch|head|options|trace): \{$`)
	)
	sc := bufio.NewScanner(types)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "interface paths {":
			table = &t.api
		case line == "interface paths$1 {":
			table = &t.envd
		case table == nil:
		case line == "}":
			table = nil
		case pathLine.MatchString(line):
			path = pathLine.FindStringSubmatch(line)[1]
			deprecated = false
		case strings.Contains(line, "@deprecated"):
			deprecated = true
		case method.MatchString(line):
			pat := regexp.MustCompile(`\\\{[^}]*\\\}`).ReplaceAllString(regexp.QuoteMeta(path), `[^/]+`)
			*table = append(*table, route{method: strings.ToUpper(method.FindStringSubmatch(line)[1]), path: path,
				re: regexp.MustCompile("^" + pat + "$"), deprecated: deprecated})
			deprecated = false
		case strings.HasPrefix(line, "    ") && strings.HasSuffix(line, "?: never;"), line == "    parameters: {":
			deprecated = false
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	js, err := os.ReadFile(filepath.Join(dir, "dist", "index.mjs"))
	if err != nil {
		return nil, err
	}
	for _, m := range regexp.MustCompile(`fileDesc\("([A-Za-z0-9+/=]+)"`).FindAllSubmatch(js, -1) {
		raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(string(m[1]), "="))
		if err != nil {
			return nil, fmt.Errorf("%s: file descriptor: %w", sdk, err)
		}
		var fd descriptorpb.FileDescriptorProto
		if err := proto.Unmarshal(raw, &fd); err != nil {
			return nil, fmt.Errorf("%s: file descriptor: %w", sdk, err)
		}
		for _, svc := range fd.GetService() {
			for _, m := range svc.GetMethod() {
				deprecated := m.GetOptions().GetDeprecated() || svc.GetOptions().GetDeprecated()
				if !deprecated {
					t.services["/"+fd.GetPackage()+"."+svc.GetName()+"/"+m.GetName()] = true
				}
			}
		}
	}
	if len(t.api) == 0 || len(t.envd) == 0 || len(t.services) == 0 {
		return nil, fmt.Errorf("%s: found %d control plane routes, %d envd routes, %d envd methods; the package's layout changed",
			sdk, len(t.api), len(t.envd), len(t.services))
	}
	return t, nil
}

// errNotCurrent marks a request that is no current route of the SDK.
var errNotCurrent = errors.New("not a current route")

// check says whether a request to host is a current route of the SDK.
func (t *routeTable) check(method, host, path string) error {
	var table []route
	switch {
	case strings.HasPrefix(host, "api."):
		table = t.api
	case strings.HasPrefix(host, "49983-"):
		if strings.HasPrefix(path, "/process.") || strings.HasPrefix(path, "/filesystem.") {
			if method == "POST" && t.services[path] {
				return nil
			}
			return fmt.Errorf("%w: %s %s is no method of envd's protos in %s", errNotCurrent, method, path, t.sdk)
		}
		table = t.envd
	default:
		return nil // a sandbox's own port: the user's routes
	}
	for _, r := range table {
		if r.method == method && r.re.MatchString(path) {
			if r.deprecated {
				return fmt.Errorf("%w: %s %s is %s %s, deprecated in %s", errNotCurrent, method, path, r.method, r.path, t.sdk)
			}
			return nil
		}
	}
	return fmt.Errorf("%w: %s %s (host %s) is absent from %s", errNotCurrent, method, path, host, t.sdk)
}

func TestRouteTable(t *testing.T) {
	rt, err := sdkRoutes()
	if err != nil {
		t.Fatalf("route table of the pinned SDK: %v", err)
	}
	tests := []struct {
		method, host, path string
		current            bool
	}{
		{"POST", "api.e2b.app", "/v2/sandboxes", true},
		{"GET", "api.e2b.app", "/v2/sandboxes", true},
		{"POST", "api.e2b.app", "/v2/sandboxes/abc/connect", true},
		{"POST", "api.e2b.app", "/sandboxes/abc/pause", true},
		{"DELETE", "api.e2b.app", "/sandboxes/abc", true},
		{"POST", "api.e2b.app", "/sandboxes", false},
		{"GET", "api.e2b.app", "/sandboxes", false},
		{"POST", "api.e2b.app", "/sandboxes/abc/connect", false},
		{"POST", "api.e2b.app", "/sandboxes/abc/resume", false},
		{"POST", "api.e2b.app", "/sandboxes/abc/nowhere", false},
		{"GET", "49983-abc.e2b.app", "/files", true},
		{"GET", "49983-abc.e2b.app", "/health", true},
		{"POST", "49983-abc.e2b.app", "/process.Process/Start", true},
		{"POST", "49983-abc.e2b.app", "/filesystem.Filesystem/ListDir", true},
		{"POST", "49983-abc.e2b.app", "/process.Process/Nothing", false},
		{"POST", "49983-abc.e2b.app", "/init", false},
		{"GET", "8080-abc.e2b.app", "/anything", true},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			err := rt.check(tt.method, tt.host, tt.path)
			if (err == nil) != tt.current {
				t.Errorf("check(%s %s %s) = %v, want current %v", tt.method, tt.host, tt.path, err, tt.current)
			}
		})
	}
}
