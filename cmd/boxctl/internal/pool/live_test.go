package pool_test

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/pool"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/sandboxtest"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/reaper"
)

// newPool starts a keeper of size boxes of the Claude Code harness on
// tg, removed at the end of t (no box of the pool may remain).
func newPool(t testing.TB, f *fixture, tg target, name string, size int, wait bool) (*pool.Pool, *sandbox.Provider, string) {
	return newPoolOpts(t, f, tg, name, pool.Options{Size: size, Wait: wait})
}

// newPoolOpts is newPool with more of the pool's options.
func newPoolOpts(t testing.TB, f *fixture, tg target, name string, o pool.Options) (*pool.Pool, *sandbox.Provider, string) {
	t.Helper()
	p := f.On(t, tg, nil)
	dir := t.TempDir()
	o.Provider, o.Name, o.Harness, o.Dir, o.MaxAge = p, name, claude.Harness, dir, 10*time.Minute
	pl, err := pool.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := pl.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		list, err := tg.Vendor.List(ctx, map[string]string{boxmeta.LabelPool: name})
		if err != nil {
			t.Errorf("list the pool's boxes: %v", err)
		}
		for _, b := range list {
			t.Errorf("box %s of pool %s remains after Close", b.ID, name)
			if box, err := tg.Vendor.Connect(ctx, b.ID); err == nil {
				_ = box.Destroy(ctx)
			}
		}
	})
	return pl, p, dir
}

// waitFull polls the keeper until size boxes wait.
func waitFull(t testing.TB, pl *pool.Pool, size int) {
	t.Helper()
	polltest.UntilNil(t, 3*time.Minute, fmt.Sprintf("%d ready boxes in the pool", size), func() error {
		if st := pl.Stats(); st.Ready < size {
			return fmt.Errorf("the pool has %+v", st)
		}
		return nil
	})
}

var (
	poolClaims       = flag.Int("pool-claims", 3, "personalized claims in TestPool_PersonalizedClaimsStayHits (200 for the full size)")
	poolSharedClaims = flag.Int("pool-shared-claims", 4, "claims of the two processes together in TestPool_TwoProcessesClaim (200 for the full size)")
)

// poolSizeFor is the size of a pool that serves claims claims one after
// another: all of them up to 8, then 8, refilled as they go.
func poolSizeFor(claims int) int { return min(claims, 8) }

// waitReady polls the keeper until at least one box waits.
func waitReady(t testing.TB, pl *pool.Pool) {
	t.Helper()
	waitFull(t, pl, 1)
}

// TestPool_PersonalizedClaimsStayHits claims from a pool sized to the
// demand (-pool-claims claims, one after another, each once the keeper
// has a box ready), each claim with 5 secret env values, labels and a
// model of its own: at least 99% of the claims are hits, no secret of a
// claim is in the box's configuration before or after it (nor the pool
// token), and a turn runs in a claimed box with the claim's Router key
// and deadline.
func TestPool_PersonalizedClaimsStayHits(t *testing.T) {
	f := setup(t)
	tg := f.Docker()
	n := *poolClaims
	size := poolSizeFor(n)
	pl, _, dir := newPool(t, f, tg, "hits-"+randText()[:6], size, false)
	waitFull(t, pl, size)
	before := map[string]string{}
	// note inspects every box waiting in the pool that was not seen yet.
	note := func() {
		waiting, err := pool.List(dir, pl.Name())
		if err != nil || len(waiting) == 0 {
			t.Fatalf("pool file lists %d boxes (%v), want some", len(waiting), err)
		}
		for _, rec := range waiting {
			if _, ok := before[rec.BoxID]; ok {
				continue
			}
			before[rec.BoxID] = tg.Inspect(t, rec.BoxID)
			if strings.Contains(before[rec.BoxID], rec.Token) {
				t.Errorf("the pool token of %s is in its inspect data", rec.BoxID)
			}
		}
	}
	var took []time.Duration
	hits := 0
	for i := range n {
		waitReady(t, pl)
		note()
		secrets := map[string]string{}
		for j := range 5 {
			secrets[fmt.Sprintf("SECRET_%d", j)] = "secret-" + randText()
		}
		profile := claude
		profile.Model.Default = fmt.Sprintf("claude-model-%d", i)
		start := time.Now()
		env, outcome, err := pl.Claim(t.Context(), sandbox.CreateRequest{Profile: profile, Env: secrets,
			Labels: map[string]string{"claim": fmt.Sprint(i)}, Lifetime: 5 * time.Minute})
		if err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
		took = append(took, time.Since(start))
		if outcome == pool.Hit {
			hits++
		} else {
			t.Logf("claim %d = %s", i, outcome)
		}
		checkClaim(t, f, tg, env, i, secrets, before)
		if i == 0 {
			text, _, err := sandboxtest.Turn(t.Context(), env, provider.Turn{Prompt: "Say hello."})
			if err != nil || !strings.Contains(text, sandboxtest.ReplyText) {
				t.Errorf("turn in a claimed box = %q, %v", text, err)
			}
		}
		// Claimed boxes go at once, so that the machine holds no more
		// than the pool and one claim.
		if err := env.Destroy(context.Background()); err != nil {
			t.Errorf("destroy claim %d: %v", i, err)
		}
	}
	t.Logf("%d personalized claims from a pool of %d: %d hits; claim p50 %v, p99 %v", n, size, hits, sandboxtest.Quantile(took, 0.5), sandboxtest.Quantile(took, 0.99))
	if 100*hits < 99*n {
		t.Errorf("%d hits of %d claims, want at least 99%%", hits, n)
	}
	if s := pl.Stats(); s.Hits != int64(hits) || s.Misses != int64(n-hits) {
		t.Errorf("stats %+v, want %d hits and %d misses", s, hits, n-hits)
	}
}

// checkClaim checks claim i's environment: its phases, its deadline (the
// claim's), and that none of its secrets, its bearer or the router key is
// in the box's inspect data before the claim (before, by box id) or after.
func checkClaim(t *testing.T, f *fixture, tg target, env *sandbox.Environment, i int, secrets, before map[string]string) {
	t.Helper()
	var phases []string
	for _, ph := range env.Timings() {
		phases = append(phases, ph.Name)
	}
	if want := []string{sandbox.PhaseChecks, sandbox.PhaseClaim, sandbox.PhaseAttach}; !slices.Equal(phases, want) {
		t.Errorf("claim %d phases %v, want %v", i, phases, want)
	}
	ref := env.Reference()
	if left := time.Until(ref.Deadline); left <= 4*time.Minute || left > 5*time.Minute+2*time.Second {
		t.Errorf("claim %d deadline is %v away, want the claim's 5m from now", i, left)
	}
	got, err := env.Box().Read(t.Context(), boxmeta.DeadlineFile)
	if err != nil || strings.TrimSpace(string(got)) != fmt.Sprint(ref.Deadline.Unix()) {
		t.Errorf("box-init's deadline file = %q, %v; want %d", got, err, ref.Deadline.Unix())
	}
	after := tg.Inspect(t, ref.BoxID)
	b, ok := before[ref.BoxID]
	if !ok {
		t.Errorf("claim %d got box %s, which did not wait in the pool", i, ref.BoxID)
		return
	}
	delete(before, ref.BoxID)
	for name, s := range secrets {
		if strings.Contains(b, s) || strings.Contains(after, s) {
			t.Errorf("claim %d: %s is in the box's inspect data", i, name)
		}
	}
	for name, s := range map[string]string{"bearer": ref.Bearer, "router key": f.Router.Key} {
		if strings.Contains(b, s) || strings.Contains(after, s) {
			t.Errorf("claim %d: the %s is in the box's inspect data", i, name)
		}
	}
}

// TestPool_ClaimClonesRepository: a claim with a repository is still a
// hit; the box clones the repository after the handover, checks out the
// ref, and the credentials in the repository's URL are in no inspect
// data of the box.
func TestPool_ClaimClonesRepository(t *testing.T) {
	f := setup(t)
	tg := f.Docker()
	url, head := sandboxtest.ServeRepo(t, f, sandboxtest.RepoShape{Files: 12, FileBytes: 512, Commits: 2, Churn: 6})
	pl, _, _ := newPool(t, f, tg, "repo-"+randText()[:6], 1, false)
	waitFull(t, pl, 1)
	token := "repo-token-" + randText()
	withCreds := strings.Replace(url, "http://", "http://agent:"+token+"@", 1)
	env, outcome, err := pl.Claim(t.Context(), sandbox.CreateRequest{Profile: claude,
		Workspace: &sandbox.WorkspaceRepo{RepoURL: withCreds, GitRef: head}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Destroy(context.Background()) })
	if outcome != pool.Hit {
		t.Errorf("claim = %s, want %s", outcome, pool.Hit)
	}
	var phases []string
	for _, ph := range env.Timings() {
		phases = append(phases, ph.Name)
	}
	if want := []string{sandbox.PhaseChecks, sandbox.PhaseClaim, sandbox.PhaseClone, sandbox.PhaseAttach}; !slices.Equal(phases, want) {
		t.Errorf("phases %v, want %v", phases, want)
	}
	res, err := env.Box().Exec(t.Context(), vendors.ExecSpec{Command: []string{"sh", "-c", "git rev-parse HEAD && ls src | wc -l"}, Dir: sandbox.Workspace})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("git in the workspace: %v %+v", err, res)
	}
	if got := strings.Fields(string(res.Stdout)); len(got) != 2 || got[0] != head || got[1] == "0" {
		t.Errorf("workspace HEAD and directories = %q, want %s and the repository's files", res.Stdout, head)
	}
	if strings.Contains(tg.Inspect(t, env.Box().ID()), token) {
		t.Error("the repository's credentials are in the box's inspect data")
	}
}

// TestPool_EmptyFallsBack: a claim of an empty pool creates its box cold
// without Wait, and waits for the next box with it.
func TestPool_EmptyFallsBack(t *testing.T) {
	f := setup(t)
	tg := f.Docker()
	pl, _, _ := newPool(t, f, tg, "empty-"+randText()[:6], 1, true)
	waitFull(t, pl, 1)
	for i, want := range []pool.Outcome{pool.Hit, pool.Waited} {
		env, outcome, err := pl.Claim(t.Context(), sandbox.CreateRequest{Profile: claude})
		if err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
		t.Cleanup(func() { _ = env.Destroy(context.Background()) })
		if outcome != want {
			t.Errorf("claim %d = %s, want %s", i, outcome, want)
		}
	}
	var _ vendors.Vendor = tg.Vendor
}

// poolChild is a child process of the pool tests: "keeper" keeps the
// pool $BOXCTL_SANDBOX_POOL in $BOXCTL_SANDBOX_POOL_DIR until killed;
// "claimer" claims from it $BOXCTL_POOL_CHILD_CLAIMS times (default 2) and
// prints each box id with its outcome, destroying each box once claimed.
func poolChild(mode string, p *sandbox.Provider) int {
	name, dir := os.Getenv("BOXCTL_SANDBOX_POOL"), os.Getenv("BOXCTL_SANDBOX_POOL_DIR")
	if mode == "keeper" {
		if _, err := pool.New(pool.Options{Provider: p, Name: name, Harness: claude.Harness, Dir: dir, Size: 3, Parallel: 3}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		select {} // until killed
	}
	claims, err := strconv.Atoi(cmp.Or(os.Getenv("BOXCTL_POOL_CHILD_CLAIMS"), "2"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for range claims {
		e, outcome, err := pool.ClaimFrom(context.Background(), p, dir, name, sandbox.CreateRequest{Profile: claude,
			Env: map[string]string{"SECRET": randText()}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(e.Box().ID(), outcome)
		if err := e.Destroy(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

func poolChildCmd(t *testing.T, f *fixture, mode, name, dir string, env ...string) *exec.Cmd {
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childVar+"="+mode, "BOXCTL_SANDBOX_POOL="+name, "BOXCTL_SANDBOX_POOL_DIR="+dir),
		f.ChildEnv(sandbox.NewRunTag(), 10*time.Minute)...)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	return cmd
}

// TestPool_TwoProcessesClaim: two processes claim from one pool kept by
// this one at once, -pool-shared-claims claims in all; no box is claimed
// twice. A claim that finds the pool empty falls back to a cold create,
// so each claim's box is its own either way.
func TestPool_TwoProcessesClaim(t *testing.T) {
	f := setup(t)
	tg := f.Docker()
	total := max(*poolSharedClaims, 2)
	size := poolSizeFor(total)
	pl, _, dir := newPool(t, f, tg, "two-"+randText()[:6], size, false)
	waitFull(t, pl, size)
	outs := make([][]byte, 2)
	var wg sync.WaitGroup
	for i := range outs {
		each := total / 2
		if i == 0 {
			each += total % 2
		}
		wg.Go(func() {
			out, err := poolChildCmd(t, f, "claimer", pl.Name(), dir, "BOXCTL_POOL_CHILD_CLAIMS="+strconv.Itoa(each)).Output()
			if err != nil {
				t.Errorf("claimer %d: %v", i, err)
			}
			outs[i] = out
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	hits := 0
	for _, out := range outs {
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			id, outcome, _ := strings.Cut(line, " ")
			if seen[id] {
				t.Errorf("box %s was claimed twice", id)
			}
			seen[id] = true
			switch outcome {
			case string(pool.Hit):
				hits++
			case string(pool.Cold):
			default:
				t.Errorf("claim of %s = %q, want a hit or a cold create", id, outcome)
			}
		}
	}
	t.Logf("two processes: %d claims from a pool of %d, %d hits, no box twice", len(seen), size, hits)
	if len(seen) != total {
		t.Errorf("%d boxes claimed, want %d", len(seen), total)
	}
	if hits < size {
		t.Errorf("%d hits, want at least the pool's %d boxes that waited", hits, size)
	}
}

// TestPool_KeeperKilledMidRefill: a keeper killed with SIGKILL while it
// boots its boxes leaves nothing once gc's rule (vendors/reaper: a box
// whose owner process is gone) has run.
func TestPool_KeeperKilledMidRefill(t *testing.T) {
	f := setup(t)
	tg := f.Docker()
	name := "kill-" + randText()[:6]
	cmd := poolChildCmd(t, f, "keeper", name, t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	filter := map[string]string{boxmeta.LabelPool: name}
	polltest.Until(t, 2*time.Minute, "a box of the keeper", func() bool {
		list, err := tg.Vendor.List(t.Context(), filter)
		return err == nil && len(list) > 0
	})
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	polltest.Until(t, 2*time.Minute, "no box of the killed keeper after gc", func() bool {
		if _, err := reaper.Reap(t.Context(), tg.Vendor, reaper.Options{Filter: filter}); err != nil {
			t.Logf("reap: %v", err)
		}
		list, err := tg.Vendor.List(t.Context(), filter)
		return err == nil && len(list) == 0
	})
}
