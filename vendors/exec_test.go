package vendors_test

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/tangle-network/boxctl/vendors"
)

func TestStreamExec(t *testing.T) {
	errRun := errors.New("exec failed")
	tests := []struct {
		name    string
		spec    vendors.ExecSpec
		runErr  error
		want    vendors.ExecResult
		wantErr string
	}{
		{name: "empty command", spec: vendors.ExecSpec{}, wantErr: "box: exec: empty command"},
		{name: "output kept", spec: vendors.ExecSpec{Command: []string{"x"}}, want: vendors.ExecResult{ExitCode: 3, Stdout: []byte("out"), Stderr: []byte("err")}},
		{name: "output capped", spec: vendors.ExecSpec{Command: []string{"x"}, MaxOutput: 2}, want: vendors.ExecResult{ExitCode: 3, Stdout: []byte("ou"), Stderr: []byte("er")}},
		{name: "exec error", spec: vendors.ExecSpec{Command: []string{"x"}}, runErr: errRun, wantErr: errRun.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := vendors.StreamExec(context.Background(), "box", tt.spec, func(_ context.Context, stdout, stderr io.Writer) (int, error) {
				io.WriteString(stdout, "out")
				io.WriteString(stderr, "err")
				return 3, tt.runErr
			})
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.ExitCode != tt.want.ExitCode || string(got.Stdout) != string(tt.want.Stdout) || string(got.Stderr) != string(tt.want.Stderr) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestExecSpec_OutputCap(t *testing.T) {
	tests := []struct {
		max, want int64
	}{
		{0, vendors.DefaultMaxOutput},
		{-1, vendors.DefaultMaxOutput},
		{5, 5},
	}
	for _, tt := range tests {
		if got := (vendors.ExecSpec{MaxOutput: tt.max}).OutputCap(); got != tt.want {
			t.Errorf("OutputCap with MaxOutput %d = %d, want %d", tt.max, got, tt.want)
		}
	}
}

func TestResources_Or(t *testing.T) {
	defaults := vendors.Resources{CPUs: 2, MemoryBytes: 1 << 30, Pids: 512, DiskBytes: 10 << 30}
	tests := []struct {
		name string
		r    vendors.Resources
		want vendors.Resources
	}{
		{name: "none asked", want: defaults},
		{name: "all asked", r: vendors.Resources{CPUs: 0.5, MemoryBytes: 1, Pids: 2, DiskBytes: 3}, want: vendors.Resources{CPUs: 0.5, MemoryBytes: 1, Pids: 2, DiskBytes: 3}},
		{name: "some asked", r: vendors.Resources{MemoryBytes: 7}, want: vendors.Resources{CPUs: 2, MemoryBytes: 7, Pids: 512, DiskBytes: 10 << 30}},
	}
	for _, tt := range tests {
		if got := tt.r.Or(defaults); got != tt.want {
			t.Errorf("%s: Or = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestNotFound(t *testing.T) {
	errMissing, errOther := errors.New("no such container"), errors.New("engine down")
	isMissing := func(err error) bool { return err == errMissing }
	tests := []struct {
		name     string
		id       string
		err      error
		want     string
		notFound bool
	}{
		{name: "nil", id: "b1", err: nil},
		{name: "missing", id: "b1", err: errMissing, want: "box: box b1 not found: no such container", notFound: true},
		{name: "no id", id: "", err: errMissing, want: "no such container"},
		{name: "other", id: "b1", err: errOther, want: "engine down"},
	}
	for _, tt := range tests {
		err := vendors.NotFound("box", tt.id, tt.err, isMissing)
		if tt.err == nil {
			if err != nil {
				t.Errorf("%s: NotFound = %v, want nil", tt.name, err)
			}
			continue
		}
		if err == nil || err.Error() != tt.want || errors.Is(err, vendors.ErrNotFound) != tt.notFound {
			t.Errorf("%s: NotFound = %v, want %q (ErrNotFound %v)", tt.name, err, tt.want, tt.notFound)
		}
		if !errors.Is(err, tt.err) && !tt.notFound {
			t.Errorf("%s: NotFound lost %v", tt.name, tt.err)
		}
	}
}
