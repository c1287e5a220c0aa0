package depcheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const dockerClientPkg = "github.com/docker/docker/client"

// dockerConstructors are the functions of the Docker client package that
// make a client; internal/dockerclient.New is the only caller allowed.
var dockerConstructors = map[string]bool{"NewClientWithOpts": true, "NewEnvClient": true, "NewClient": true}

// dockerConstructorCalls returns the positions in a Go file where it calls
// a constructor of the Docker client package, under whatever name the
// file imports it.
func dockerConstructorCalls(fset *token.FileSet, name string, src []byte) ([]token.Position, error) {
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	local := ""
	for _, imp := range f.Imports {
		if path, _ := strconv.Unquote(imp.Path.Value); path == dockerClientPkg {
			local = "client"
			if imp.Name != nil {
				local = imp.Name.Name
			}
		}
	}
	if local == "" || local == "_" {
		return nil, nil
	}
	var calls []token.Position
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr: // client.NewClientWithOpts
			if id, ok := n.X.(*ast.Ident); ok && id.Name == local && dockerConstructors[n.Sel.Name] {
				calls = append(calls, fset.Position(n.Pos()))
			}
		case *ast.Ident: // NewClientWithOpts, dot-imported
			if local == "." && dockerConstructors[n.Name] {
				calls = append(calls, fset.Position(n.Pos()))
			}
		}
		return true
	})
	return calls, nil
}

// TestDockerClientHasOneConstructor fails when a Go file outside
// internal/dockerclient (tests included) constructs a Docker client itself.
func TestDockerClientHasOneConstructor(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			if filepath.ToSlash(path) == filepath.ToSlash(filepath.Join(root, "internal", "dockerclient")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		calls, err := dockerConstructorCalls(fset, path, src)
		if err != nil {
			t.Errorf("parse: %v", err)
			return nil
		}
		for _, c := range calls {
			t.Errorf("%s constructs a Docker client: use internal/dockerclient.New", c)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("walked %d Go files under %s, want the whole module", files, root)
	}
}

func TestDockerConstructorCalls(t *testing.T) {
	tests := []struct {
		name, src string
		want      int
	}{
		{"plain import", `package p
import "github.com/docker/docker/client"
var c, _ = client.NewClientWithOpts(client.FromEnv)`, 1},
		{"renamed import", `package p
import docker "github.com/docker/docker/client"
func f() { docker.NewClientWithOpts(); docker.NewEnvClient() }`, 2},
		{"dot import", `package p
import . "github.com/docker/docker/client"
var c, _ = NewClientWithOpts()`, 1},
		{"other package of that name", `package p
import "github.com/moby/buildkit/client"
var c, _ = client.NewClientWithOpts()`, 0},
		{"options only", `package p
import "github.com/docker/docker/client"
var o = client.WithHost("unix:///x")`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls, err := dockerConstructorCalls(token.NewFileSet(), "x.go", []byte(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			if len(calls) != tt.want {
				t.Errorf("dockerConstructorCalls(%s) = %v, want %d calls", tt.name, calls, tt.want)
			}
		})
	}
}
