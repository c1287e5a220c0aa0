package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/sandboxtest"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
)

// benchRepo is BenchmarkRepoAtClaim's repository, about 12 MB of files.
var benchRepo = sandboxtest.RepoShape{Files: 3000, FileBytes: 4 << 10, Commits: 20, Churn: 150}

// BenchmarkRepoAtClaim compares the two ways a claimed box can get its
// repository, in a Docker box from a repository served over git's smart
// HTTP on the boxes' network: clone-ms is a clone of the requested ref
// after the handover (what a claim does), fetch-ms a fetch and checkout of
// that ref in a checkout of the previous commit that the box held before
// its claim (what pools keyed by repository and ref would do);
// fetch-ratio is fetch-ms over clone-ms. Each op runs both.
func BenchmarkRepoAtClaim(b *testing.B) {
	f := setup(b)
	url, head := sandboxtest.ServeRepo(b, f, benchRepo)
	p := f.On(b, f.Docker(), nil)
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
