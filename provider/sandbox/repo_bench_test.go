package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/cgi"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
)

// repoShape is the shape of a test repository: files files of about
// fileBytes each, commits commits of history (each after the first
// changes about churn files), and one newer commit that changes a few.
type repoShape struct{ files, fileBytes, commits, churn int }

// benchRepo is BenchmarkRepoAtClaim's repository, about 12 MB of files.
var benchRepo = repoShape{files: 3000, fileBytes: 4 << 10, commits: 20, churn: 150}

// BenchmarkRepoAtClaim compares the two ways a claimed box can get its
// repository, in a Docker box from a repository served over git's smart
// HTTP on the boxes' network: clone-ms is a clone of the requested ref
// after the handover (what a claim does), fetch-ms a fetch and checkout of
// that ref in a checkout of the previous commit that the box held before
// its claim (what pools keyed by repository and ref would do);
// fetch-ratio is fetch-ms over clone-ms. Each op runs both.
func BenchmarkRepoAtClaim(b *testing.B) {
	f := setup(b)
	url, head := serveRepo(b, f, benchRepo)
	p := f.on(b, f.docker(), nil)
	env, err := p.Create(b.Context(), sandbox.CreateRequest{Profile: claude})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = env.Destroy(context.WithoutCancel(b.Context())) })
	box := env.Box()
	sh := func(script string, env map[string]string) time.Duration {
		start := time.Now()
		res, err := box.Exec(b.Context(), vendors.ExecSpec{Command: []string{"sh", "-c", script}, Env: env})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%s: %v %d %s", script, err, res.ExitCode, bytes.TrimSpace(res.Stderr))
		}
		return time.Since(start)
	}
	vars := map[string]string{"REPO": url, "HEAD_SHA": head, "GIT_TERMINAL_PROMPT": "0"}
	var clone, fetch time.Duration
	for i := 0; b.Loop(); i++ {
		vars["DIR"] = fmt.Sprintf("/tmp/repo-bench-%d", i)
		sh(`git clone --quiet "$REPO" "$DIR.held" && git -C "$DIR.held" checkout --quiet HEAD~1`, vars)
		fetch += sh(`cd "$DIR.held" && git fetch --quiet origin && git checkout --quiet "$HEAD_SHA"`, vars)
		clone += sh(`git clone --quiet "$REPO" "$DIR" && git -C "$DIR" checkout --quiet "$HEAD_SHA"`, vars)
		sh(`rm -rf "$DIR" "$DIR.held"`, vars)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(ms(clone), "clone-ms")
	b.ReportMetric(ms(fetch), "fetch-ms")
	b.ReportMetric(ms(fetch)/ms(clone), "fetch-ratio")
}

// serveRepo makes a repository of shape and serves it over git's smart
// HTTP (git http-backend) on an address the fixture's boxes reach. It
// returns the repository's URL and the id of its newest commit.
func serveRepo(b testing.TB, f *fixture, shape repoShape) (url, head string) {
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
	host, err := f.vendor.HostAddress(b.Context())
	if err != nil {
		b.Fatal(err)
	}
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
func (shape repoShape) fastImport() []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	const letters = "abcdefghijklmnopqrstuvwxyz     \n"
	content := func() []byte {
		out := make([]byte, shape.fileBytes)
		for i := range out {
			out[i] = letters[rng.IntN(len(letters))]
		}
		return out
	}
	var s bytes.Buffer
	for c := range shape.commits + 1 {
		fmt.Fprintf(&s, "commit refs/heads/main\ncommitter bench <bench@example.invalid> %d +0000\ndata 9\ncommit %02d\n", 1700000000+c, c)
		n, churn := shape.files, shape.churn
		if c == shape.commits {
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
