package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestBoxVerbs_Flags(t *testing.T) {
	type parsed struct {
		box    string
		boxes  []string
		cmd    []string
		dir    string
		follow bool
		dryRun bool
		target string
		every  time.Duration
	}
	check := func(t *testing.T, args []string, got parsed, called bool, err error, want parsed, wantErr string) {
		t.Helper()
		if wantErr != "" {
			if exitCode(err) != 2 || !strings.Contains(err.Error(), wantErr) || called {
				t.Fatalf("%v: error %v (exit %d, ran %v), want exit 2 containing %q", args, err, exitCode(err), called, wantErr)
			}
			return
		}
		if err != nil || !called {
			t.Fatalf("%v: %v (ran %v)", args, err, called)
		}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(parsed{})); diff != "" {
			t.Errorf("%v (-want +got):\n%s", args, diff)
		}
	}
	tests := []struct {
		args    []string
		want    parsed
		wantErr string
	}{
		{args: []string{"exec", "last", "--", "ls", "-la"}, want: parsed{box: "last", cmd: []string{"ls", "-la"}, target: "docker"}},
		{args: []string{"exec", "-w", "/tmp", "3f2a", "--", "sh", "-c", "exit 3"}, want: parsed{box: "3f2a", cmd: []string{"sh", "-c", "exit 3"}, dir: "/tmp", target: "docker"}},
		{args: []string{"exec", "last", "ls"}, wantErr: "want <box> -- CMD"},
		{args: []string{"exec", "last", "--"}, wantErr: "want <box> -- CMD"},
		{args: []string{"exec", "--", "ls"}, wantErr: "want <box> -- CMD"},
		{args: []string{"logs", "last"}, want: parsed{box: "last", target: "docker"}},
		{args: []string{"logs", "-f", "last"}, want: parsed{box: "last", follow: true, target: "docker"}},
		{args: []string{"logs"}, wantErr: "accepts 1 arg(s)"},
		{args: []string{"rm", "last", "3f2a"}, want: parsed{boxes: []string{"last", "3f2a"}, target: "docker"}},
		{args: []string{"rm"}, wantErr: "requires at least 1 arg(s)"},
		{args: []string{"ls"}, want: parsed{target: "docker"}},
		{args: []string{"ls", "--target", "nowhere"}, wantErr: `--target "nowhere"`},
		{args: []string{"ls", "--target", "e2b"}, want: parsed{target: "e2b"}},
		{args: []string{"ls", "x"}, wantErr: "unknown command"},
		{args: []string{"gc", "--dry-run"}, want: parsed{dryRun: true, target: "docker"}},
		{args: []string{"gc", "--target", "nope"}, wantErr: `--target "nope"`},
		{args: []string{"gc", "--every", "1m"}, want: parsed{target: "docker", every: time.Minute}},
		{args: []string{"gc", "--every", "10ms"}, wantErr: "--every 10ms: want at least 1s"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var got parsed
			var called bool
			var err error
			switch tt.args[0] {
			case "exec":
				var o *execOptions
				o, called, err = parseCmd(t, newExecCmd, tt.args...)
				if o != nil {
					got = parsed{box: o.box, cmd: o.command, dir: o.dir, target: o.target}
				}
			case "logs":
				var o *logsOptions
				o, called, err = parseCmd(t, newLogsCmd, tt.args...)
				if o != nil {
					got = parsed{box: o.box, follow: o.follow, target: o.target}
				}
			case "rm":
				var o *rmOptions
				o, called, err = parseCmd(t, newRmCmd, tt.args...)
				if o != nil {
					got = parsed{boxes: o.boxes, target: o.target}
				}
			case "ls":
				var o *lsOptions
				o, called, err = parseCmd(t, newLsCmd, tt.args...)
				if o != nil {
					got = parsed{target: o.target}
				}
			case "gc":
				var o *gcOptions
				o, called, err = parseCmd(t, newGCCmd, tt.args...)
				if o != nil {
					got = parsed{dryRun: o.dryRun, target: o.target, every: o.every}
				}
			}
			check(t, tt.args, got, called, err, tt.want, tt.wantErr)
		})
	}
}
