package boximage

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/buildkit/client"
	digest "github.com/opencontainers/go-digest"
)

func TestStepLogs_wrap(t *testing.T) {
	run, other := digest.FromString("run"), digest.FromString("other")
	vertex := func(d digest.Digest, name, err string) *client.SolveStatus {
		return &client.SolveStatus{Vertexes: []*client.Vertex{{Digest: d, Name: name, Error: err}}}
	}
	logs := func(d digest.Digest, chunks ...string) []*client.SolveStatus {
		var out []*client.SolveStatus
		for _, c := range chunks {
			out = append(out, &client.SolveStatus{Logs: []*client.VertexLog{{Vertex: d, Data: []byte(c)}}})
		}
		return out
	}
	join := func(ss ...[]*client.SolveStatus) []*client.SolveStatus {
		var out []*client.SolveStatus
		for _, s := range ss {
			out = append(out, s...)
		}
		return out
	}
	solveErr := errors.New(`process "/bin/sh -c npm ci" did not complete successfully: exit code: 1`)
	tests := []struct {
		name          string
		statuses      []*client.SolveStatus
		want          *StepError // nil: err passes unchanged
		wantIntegrity bool
	}{
		{"npm EINTEGRITY, lines split across chunks", join(
			[]*client.SolveStatus{vertex(run, "[5/9] RUN npm ci", "")},
			logs(run, "npm warn tarball seems to be corrupted. Trying again.\nnpm error code EINTEG", "RITY\nnpm error sha512-A integrity checksum failed when using sha512: wanted sha512-A but got sha512-B. (3 bytes)\n"),
			[]*client.SolveStatus{vertex(run, "[5/9] RUN npm ci", "exit code: 1"), vertex(other, "[4/9] RUN x", "context canceled")},
		), &StepError{Step: "[5/9] RUN npm ci", Log: []string{"npm error code EINTEGRITY",
			"npm error sha512-A integrity checksum failed when using sha512: wanted sha512-A but got sha512-B. (3 bytes)"}}, true},
		{"sha512sum of the Node tarball", join(
			logs(run, "/mnt/node/node.tgz: FAILED\nsha512sum: WARNING: 1 computed checksum did NOT match"),
			[]*client.SolveStatus{vertex(run, "[2/9] RUN --mount=type=bind,from=node\n    case", "exit code: 1")},
		), &StepError{Step: "[2/9] RUN --mount=type=bind,from=node case", Log: []string{"/mnt/node/node.tgz: FAILED",
			"sha512sum: WARNING: 1 computed checksum did NOT match"}}, true},
		{"other failure keeps the last lines", join(
			logs(run, strings.Repeat("line\n", 30)+"boom\n"),
			[]*client.SolveStatus{vertex(run, "[3/3] RUN "+strings.Repeat("x", 200), "exit code: 3")},
		), &StepError{Step: "[3/3] RUN " + strings.Repeat("x", stepNameLen-13) + "...",
			Log: append(strings.Split(strings.Repeat("line\n", stepErrLines-1), "\n")[:stepErrLines-1], "boom")}, false},
		{"only cancelled steps", []*client.SolveStatus{vertex(other, "[1/1] RUN sleep", "context canceled")}, nil, false},
		{"no step failed", logs(run, "fine\n"), nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStepLogs()
			in, out := make(chan *client.SolveStatus), make(chan *client.SolveStatus)
			go func() {
				for _, st := range tt.statuses {
					in <- st
				}
				close(in)
			}()
			go s.tee(in, out)
			n := 0
			for range out {
				n++
			}
			if n != len(tt.statuses) {
				t.Errorf("tee passed on %d statuses, want %d", n, len(tt.statuses))
			}
			err := s.wrap(solveErr)
			if tt.want == nil {
				if err != solveErr {
					t.Errorf("wrap() = %v, want the error unchanged", err)
				}
				return
			}
			var se *StepError
			if !errors.As(err, &se) {
				t.Fatalf("wrap() = %v, want a *StepError", err)
			}
			if diff := cmp.Diff(*tt.want, StepError{Step: se.Step, Log: se.Log}); diff != "" || se.Err != solveErr {
				t.Errorf("wrap() (-want +got):\n%s\nerr %v", diff, se.Err)
			}
			if got := errors.Is(err, ErrIntegrity); got != tt.wantIntegrity {
				t.Errorf("errors.Is(wrap(), ErrIntegrity) = %v, want %v", got, tt.wantIntegrity)
			}
			if !errors.Is(err, solveErr) || !strings.Contains(err.Error(), "exit code: 1") && tt.wantIntegrity {
				t.Errorf("wrap() = %q, want it to wrap and quote BuildKit's error", err)
			}
		})
	}
}
