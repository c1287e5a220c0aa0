package sandboxtest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/cgi"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// RepoShape is the shape of a test repository: files files of about
// fileBytes each, commits commits of history (each after the first
// changes about churn files), and one newer commit that changes a few.
type RepoShape struct{ Files, FileBytes, Commits, Churn int }

// ServeRepo makes a repository of shape and serves it over git's smart
// HTTP (git http-backend) on an address the fixture's boxes reach. It
// returns the repository's URL and the id of its newest commit.
func ServeRepo(b testing.TB, f *Fixture, shape RepoShape) (url, head string) {
	b.Helper()
	host, err := f.Vendor.HostAddress(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	return ServeRepoOn(b, host, shape)
}

// ServeRepoOn is ServeRepo on host, an address of this machine.
func ServeRepoOn(b testing.TB, host string, shape RepoShape) (url, head string) {
	b.Helper()
	root := b.TempDir()
	repo := filepath.Join(root, "bench.git")
	git := func(stdin []byte, args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Stdin = bytes.NewReader(stdin)
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	git(nil, "init", "-q", "--bare", "-b", "main", repo)
	git(shape.fastImport(), "--git-dir", repo, "fast-import", "--quiet")
	git(nil, "--git-dir", repo, "repack", "-a", "-d", "-q")
	head = git(nil, "--git-dir", repo, "rev-parse", "main")
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		b.Fatal(err)
	}
	bin, err := exec.LookPath("git")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: &cgi.Handler{Path: bin, Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}}
	go func() { _ = srv.Serve(l) }()
	b.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String() + "/bench.git", head
}

// fastImport is a git fast-import stream of the repository on branch
// main: its commits of history, then the newest one.
func (shape RepoShape) fastImport() []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	const letters = "abcdefghijklmnopqrstuvwxyz     \n"
	content := func() []byte {
		out := make([]byte, shape.FileBytes)
		for i := range out {
			out[i] = letters[rng.IntN(len(letters))]
		}
		return out
	}
	var s bytes.Buffer
	for c := range shape.Commits + 1 {
		fmt.Fprintf(&s, "commit refs/heads/main\ncommitter bench <bench@example.invalid> %d +0000\ndata 9\ncommit %02d\n", 1700000000+c, c)
		n, churn := shape.Files, shape.Churn
		if c == shape.Commits {
			churn = 20 // the newest commit changes a few files
		}
		for i := range n {
			if c > 0 && rng.IntN(n) >= churn {
				continue
			}
			body := content()
			fmt.Fprintf(&s, "M 644 inline src/d%02d/f%04d.txt\ndata %d\n", i%64, i, len(body))
			s.Write(body)
			s.WriteByte('\n')
		}
		s.WriteByte('\n')
	}
	return s.Bytes()
}
