package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/boximage"
	"github.com/tangle-network/boxctl/conformance"
	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/pins"
	"github.com/tangle-network/boxctl/vendors/egress/firewall"
)

func TestConformanceCmd_flags(t *testing.T) {
	record := filepath.Join(t.TempDir(), "record.json")
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    *conformanceOptions // checked fields: target, router, cases, report, harnesses
		wantErr string              // a usage error holding this
	}{
		{"local router", []string{"--router", "local", "--harness", "claude-code,pi", "--run", "session,box.pin"}, nil,
			&conformanceOptions{target: "docker", router: "local", harnesses: []string{"claude-code", "pi"},
				cases: []string{"session", "box.pin"}, report: "text"}, ""},
		{"router from the environment", []string{"--report", "junit"},
			map[string]string{routerURLEnv: "https://router.example", routerKeyVar: "k-123"},
			&conformanceOptions{target: "docker", report: "junit", routerURL: "https://router.example", routerKey: "k-123"}, ""},
		{"no router", nil, map[string]string{routerURLEnv: "", routerKeyVar: ""}, nil, "pass --router local"},
		{"unknown report", []string{"--router", "local", "--report", "xml"}, nil, nil, `--report "xml"`},
		{"image and record", []string{"--router", "local", "--image", "x", "--build-record", record}, nil, nil, "exclude each other"},
		{"unknown case", []string{"--router", "local", "--run", "no.such-case"}, nil, nil, `no case matches "no.such-case"`},
		{"unknown report file format", []string{"--router", "local", "--report-file", "yaml=r.yaml"}, nil, nil, "--report-file"},
		{"no parallelism", []string{"--router", "local", "--parallel", "0"}, nil, nil, "--parallel 0"},
		{"unknown target", []string{"--router", "local", "--target", "mainframe"}, nil, nil, `--target "mainframe"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var got *conformanceOptions
			var out, errOut bytes.Buffer
			cmd := newConformanceCmd(newApp(&out, &errOut), func(_ context.Context, o *conformanceOptions) error {
				got = o
				return nil
			})
			cmd.SetArgs(tt.args)
			cmd.SetOut(&out)
			cmd.SetErr(&errOut)
			err := cmd.Execute()
			if tt.wantErr != "" {
				if exitCode(err) != 2 || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("conformance %v = %v (exit %d), want a usage error holding %q", tt.args, err, exitCode(err), tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("conformance %v = %v", tt.args, err)
			}
			type view struct {
				Target, Router, Report, URL, Key string
				Harnesses, Cases                 []string
			}
			v := func(o *conformanceOptions) view {
				return view{o.target, o.router, o.report, o.routerURL, o.routerKey, o.harnesses, o.cases}
			}
			if diff := cmp.Diff(v(tt.want), v(got)); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

// TestConformanceCmd_live runs `boxctl conformance` on the real engine
// with the local model endpoint: a green selection writes a JSON report
// that validates as a report and exits 0, a box that cannot be ready in
// time fails its case with exit status 1 and a JUnit report naming it.
// TestConformanceCmd_list: --list prints the catalogue, --list --chaos
// the chaos family, each exactly.
func TestConformanceCmd_list(t *testing.T) {
	for _, chaos := range []bool{false, true} {
		args := []string{"conformance", "--list", "-o", "json"}
		if chaos {
			args = append(args, "--chaos")
		}
		var out, errOut bytes.Buffer
		root := newRootCmd(newApp(&out, &errOut))
		root.SetArgs(args)
		if err := root.ExecuteContext(t.Context()); err != nil {
			t.Fatalf("%v: %v (%s)", args, err, errOut.String())
		}
		var rows []struct{ ID string }
		if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
			t.Fatalf("%v: %v in %q", args, err, out.String())
		}
		var got, want []string
		for _, r := range rows {
			got = append(got, r.ID)
		}
		for _, c := range conformance.Catalogue(chaos) {
			want = append(want, c.ID)
		}
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("%v listed %v, want %v", args, got, want)
		}
	}
}

func TestConformanceCmd_live(t *testing.T) {
	liveVendor(t)
	img := boxtest.Image(t, boxtest.Options{})
	useState(t)
	dir := t.TempDir()

	report := filepath.Join(dir, "report.json")
	r := boxctl(t, t.Context(), nil, "conformance", "--image", img, "--router", "local", "--run", "provider.turn,box.pin",
		"--report-file", "json="+report, "--report-file", "junit="+filepath.Join(dir, "report.xml"))
	if r.code != 0 {
		t.Fatalf("conformance: exit %d: %v", r.code, r.err)
	}
	rep := readReport(t, report)
	var ids []string
	for _, res := range rep.Results {
		ids = append(ids, res.ID()+" "+string(res.Outcome))
	}
	if want := []string{"claude-code/provider.turn pass", "claude-code/box.pin pass"}; !slices.Equal(ids, want) {
		t.Errorf("report results = %v, want %v", ids, want)
	}
	if rep.Vendor != "docker" || rep.Image != img || !strings.HasPrefix(rep.ImageDigest, "sha256:") || rep.Router != "local" {
		t.Errorf("report = vendor %s image %s digest %s router %s", rep.Vendor, rep.Image, rep.ImageDigest, rep.Router)
	}
	if x, err := os.ReadFile(filepath.Join(dir, "report.xml")); err != nil || !bytes.Contains(x, []byte(`<testcase name="box.pin"`)) {
		t.Errorf("the JUnit report file = %q, %v; want both cases", x, err)
	}
	if !strings.Contains(r.stdout, "2 passed, 0 failed") || !strings.Contains(r.stderr, "pass  claude-code/provider.turn") {
		t.Errorf("want the summary on stdout and a progress line per case on stderr")
	}

	r = boxctl(t, t.Context(), nil, "conformance", "--image", img, "--router", "local", "--run", "box.ready",
		"--ready-timeout", "1ms", "--report", "junit")
	if r.code != 1 || r.err == nil || !strings.Contains(r.err.Error(), "1 of 1 cases failed") {
		t.Fatalf("conformance with a 1ms ready timeout = exit %d, %v; want exit 1 naming the failure", r.code, r.err)
	}
	if !strings.Contains(r.stdout, `<testcase name="box.ready"`) || !strings.Contains(r.stdout, "ready within 1ms") {
		t.Errorf("the JUnit report does not show the failed case and its evidence:\n%s", r.stdout)
	}
}

// TestPinsProve proves a harness from a green report into a pins
// directory, after which the default harness set (a build without
// --harness) installs it; reports that prove nothing change nothing.
func TestPinsProve(t *testing.T) {
	p, err := pins.Load()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "pins")
	if err := pins.Save(dir, p); err != nil {
		t.Fatal(err)
	}
	h, _ := p.Harness("claude-code")
	started := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	rep := &conformance.Report{Vendor: "docker", Image: "boxctl-box:b1", ImageDigest: "sha256:" + strings.Repeat("34", 32),
		Router: "local", Boxctl: "v1", StartedAt: started, Harnesses: []conformance.HarnessRun{{Name: h.Name, Version: h.Version}}}
	for _, c := range conformance.Cases() {
		rep.Results = append(rep.Results, conformance.Result{Case: c.ID, Harness: h.Name, Outcome: conformance.Pass, Started: started})
	}
	write := func(r *conformance.Report) string {
		f := filepath.Join(t.TempDir(), "report.json")
		var b bytes.Buffer
		if err := r.WriteJSON(&b); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}

	emulated := *rep
	emulated.Emulated = true
	r := boxctl(t, t.Context(), nil, "pins", "prove", "claude-code", "--report", write(&emulated), "--dir", dir)
	if r.code != 1 || !errors.Is(r.err, conformance.ErrNotProven) || !strings.Contains(r.err.Error(), "emulator") {
		t.Errorf("prove from an emulator's report = exit %d, %v; want a refusal naming the emulator", r.code, r.err)
	}
	if _, err := mustLoad(t, dir).Select(nil); !errors.Is(err, pins.ErrNoHarness) {
		t.Errorf("a refused proof changed the pins: Select(nil) = %v", err)
	}

	r = boxctl(t, t.Context(), nil, "pins", "prove", "claude", "--report", write(rep), "--dir", dir, "-o", "json")
	if r.code != 0 {
		t.Fatalf("prove: exit %d: %v", r.code, r.err)
	}
	var res proveResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Harness != "claude-code" || res.Proof.Vendor != "docker" ||
		res.Proof.ImageDigest != rep.ImageDigest || res.Proof.Cases != len(conformance.Cases()) {
		t.Errorf("prove printed %q (%v)", r.stdout, err)
	}
	np := mustLoad(t, dir)
	nh, _ := np.Harness("claude-code")
	if !nh.Proven || len(nh.ProvenBy) != 1 || nh.ProvenBy[0].ImageDigest != rep.ImageDigest || !nh.ProvenBy[0].ProvenAt.Equal(started) {
		t.Errorf("proven row = %v by %+v", nh.Proven, nh.ProvenBy)
	}
	// A build without --harness installs the proven set: boxctl embeds the
	// pins directory when it is built (the bridge's version comes from
	// that build).
	np.Bridge = p.Bridge
	rd, err := boximage.Render(np, boximage.RenderOptions{})
	if err != nil {
		t.Fatalf("Render(proven pins, no harness named) = %v", err)
	}
	var got []string
	for _, h := range rd.Harnesses {
		got = append(got, h.Name)
	}
	if !slices.Equal(got, []string{"claude-code"}) || !strings.Contains(string(rd.Dockerfile), h.Package+"@"+h.Version) {
		t.Errorf("default render installs %v, want claude-code", got)
	}
	r = boxctl(t, t.Context(), nil, "pins", "--dir", dir)
	if !strings.Contains(r.stdout, "true (docker)") {
		t.Errorf("pins does not show the proof:\n%s", r.stdout)
	}
}

func mustLoad(t *testing.T, dir string) *pins.Pins {
	t.Helper()
	p, err := pins.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConformanceCmd_security runs the security family as a user would,
// `boxctl conformance --run 'security.*'` on Docker: the command sets up
// the suite's listeners and a gate of its own on the vendor's confined
// network, and both cases pass.
func TestConformanceCmd_security(t *testing.T) {
	v := liveVendor(t)
	img := boxtest.Image(t, boxtest.Options{})
	useState(t)
	// The command leaves the confined network's rules to whatever gate
	// comes next, as a user's run would; the test removes them.
	t.Cleanup(func() {
		if bridge, _, err := v.EgressBridge(context.Background()); err == nil {
			if err := firewall.Uninstall(bridge); err != nil {
				t.Errorf("remove the confined network's rules: %v", err)
			}
		}
	})
	report := filepath.Join(t.TempDir(), "report.json")
	r := boxctl(t, t.Context(), nil, "conformance", "--image", img, "--router", "local", "--run", "security.*",
		"--report-file", "json="+report)
	if r.code != 0 {
		t.Fatalf("conformance --run security.*: exit %d: %v\n%s", r.code, r.err, r.stdout)
	}
	rep := readReport(t, report)
	var ids []string
	for _, res := range rep.Results {
		ids = append(ids, res.ID()+" "+string(res.Outcome))
		for _, n := range res.Notes {
			t.Logf("%s: %s", res.Case, n)
		}
	}
	if want := []string{"claude-code/security.egress pass", "claude-code/security.egress-change pass"}; !slices.Equal(ids, want) {
		t.Errorf("report results = %v, want %v", ids, want)
	}
}

// readReport reads the JSON report file at path.
func readReport(t *testing.T, path string) *conformance.Report {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := conformance.ReadReport(f)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}
