package jssdk

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tangle-network/boxctl/internal/goldentest"
	"github.com/tangle-network/boxctl/internal/testbed"
)

// TestLocks checks that every set's lock installs its pins at the top;
// with -update it first resolves the locks again against the registry.
func TestLocks(t *testing.T) {
	names, err := Names()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			if goldentest.Update() {
				env := testbed.Require(t)
				s, err := loadPins(name)
				if err != nil {
					t.Fatal(err)
				}
				l, err := Relock(t.Context(), filepath.Join(env.NodeDir, "bin", "npm"), env.NPMCache, s)
				if err != nil {
					t.Fatal(err)
				}
				data, err := l.Marshal()
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join("locks", name+".json"), data, 0o644); err != nil {
					t.Fatal(err)
				}
				t.Logf("lock %s rewritten; run again without -update to check it", name)
				return
			}
			s, err := Load(name)
			if err != nil {
				t.Fatal(err)
			}
			pj, pl, err := s.Files()
			if err != nil {
				t.Fatal(err)
			}
			for pkg, p := range s.Dependencies {
				if !strings.Contains(string(pj), `"`+pkg+`": "`+p.Version+`"`) {
					t.Errorf("package.json lacks %s@%s:\n%s", pkg, p.Version, pj)
				}
				if !strings.Contains(string(pl), p.Integrity) {
					t.Errorf("package-lock.json lacks the integrity of %s", pkg)
				}
			}
		})
	}
}

func TestSet_checkLock(t *testing.T) {
	s, err := Load("e2b")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		pin    Pin
		errHas string
	}{
		{"as pinned", s.Dependencies["e2b"], ""},
		{"other version", Pin{Version: "2.50.0", Integrity: s.Dependencies["e2b"].Integrity}, "pinned 2.50.0"},
		{"other integrity", Pin{Version: s.Dependencies["e2b"].Version, Integrity: "sha512-" + strings.Repeat("A", 86) + "=="}, "integrity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := s
			c.Dependencies = map[string]Pin{"e2b": tt.pin}
			err := c.checkLock()
			if (err == nil) != (tt.errHas == "") || (err != nil && !strings.Contains(err.Error(), tt.errHas)) {
				t.Errorf("checkLock() = %v, want error containing %q", err, tt.errHas)
			}
		})
	}
}

const stepsScript = `
import { Sandbox } from 'e2b';
import { createRequire } from 'node:module';
const t0 = performance.now();
const pkg = createRequire(import.meta.url)('e2b/package.json');
console.log('not a step');
console.log(JSON.stringify({ step: 'import', ok: typeof Sandbox.create === 'function', detail: pkg.version, ms: performance.now() - t0 }));
console.log(JSON.stringify({ step: 'env', ok: process.env.WANT === 'yes', detail: process.env.WANT ?? null, ms: 0 }));
`

// TestEnsure_run installs the e2b set twice at once into a fresh
// directory (one npm ci, one wait on the lock), then runs a script that
// imports it.
func TestEnsure_run(t *testing.T) {
	env := testbed.Require(t)
	s, err := Load("e2b")
	if err != nil {
		t.Fatal(err)
	}
	o := TestbedOptions(env)
	o.Dir = t.TempDir()
	var wg sync.WaitGroup
	ins := make([]Installation, 2)
	errs := make([]error, 2)
	for i := range ins {
		wg.Go(func() { ins[i], errs[i] = Ensure(t.Context(), o, s) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Ensure #%d: %v", i, err)
		}
	}
	if ins[0].Dir != ins[1].Dir {
		t.Fatalf("two installs of one set: %s and %s", ins[0].Dir, ins[1].Dir)
	}
	if _, err := os.Stat(filepath.Join(ins[0].Dir, "node_modules", "e2b", "package.json")); err != nil {
		t.Fatal(err)
	}
	var seen []string
	out, err := ins[0].Run(t.Context(), RunOptions{Script: []byte(stepsScript), Env: map[string]string{"WANT": "yes"},
		OnLine: func(l json.RawMessage) { seen = append(seen, string(l)) }})
	if err != nil {
		t.Fatal(err)
	}
	steps, err := out.Steps()
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 2 || len(seen) != 2 || strings.TrimSpace(out.Text) != "not a step" {
		t.Fatalf("steps %+v, lines seen %q, text %q", steps, seen, out.Text)
	}
	for _, st := range steps {
		if !st.OK {
			t.Errorf("step %s failed: %v", st.Step, st.Detail)
		}
	}
	if steps[0].Detail != s.Dependencies["e2b"].Version {
		t.Errorf("imported e2b %v, pinned %s", steps[0].Detail, s.Dependencies["e2b"].Version)
	}
}

// TestEnsure_integrity checks that a tarball that does not match its
// locked integrity fails the install.
func TestEnsure_integrity(t *testing.T) {
	env := testbed.Require(t)
	s, err := Load("e2b")
	if err != nil {
		t.Fatal(err)
	}
	var e map[string]any
	if err := json.Unmarshal(s.Lock.Packages["node_modules/platform"], &e); err != nil {
		t.Fatal(err)
	}
	e["integrity"] = "sha512-" + strings.Repeat("A", 86) + "=="
	raw, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	lock := *s.Lock
	lock.Packages = map[string]json.RawMessage{}
	for k, v := range s.Lock.Packages {
		lock.Packages[k] = v
	}
	lock.Packages["node_modules/platform"] = raw
	s.Lock = &lock
	// npm retries a failed fetch with backoff; one attempt shows the check.
	t.Setenv("npm_config_fetch_retries", "0")
	o := TestbedOptions(env)
	o.Dir = t.TempDir()
	_, err = Ensure(t.Context(), o, s)
	if err == nil || !strings.Contains(err.Error(), "EINTEGRITY") {
		t.Fatalf("Ensure with a wrong integrity = %v, want npm's EINTEGRITY", err)
	}
}
