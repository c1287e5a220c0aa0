package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func run(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newRootCmd(newApp(&out, &errOut))
	cmd.SetArgs(args)
	err = cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func TestRoot(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantOut  string // substring of stdout
		wantCode int
	}{
		{"version flag", []string{"--version"}, "boxctl dev", 0},
		{"version json", []string{"version", "-o", "json"}, `"version": "dev"`, 0},
		{"bad output", []string{"version", "--output", "yaml"}, "", 2},
		{"bad log level", []string{"version", "--log-level", "loud"}, "", 2},
		{"unknown flag", []string{"version", "--nope"}, "", 2},
		{"completion bash", []string{"completion", "bash"}, "__start_boxctl", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := run(t, tt.args...)
			if got := exitCode(err); got != tt.wantCode {
				t.Fatalf("exit code = %d (err %v), want %d", got, err, tt.wantCode)
			}
			if !strings.Contains(out, tt.wantOut) {
				t.Errorf("stdout = %q, want it to contain %q", out, tt.wantOut)
			}
		})
	}
}

func TestVersionJSON(t *testing.T) {
	out, _, err := run(t, "version", "--output=json")
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Version, Commit string }
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("version -o json = %q: %v", out, err)
	}
	if got.Version == "" || got.Commit == "" {
		t.Errorf("version -o json = %+v, want version and commit", got)
	}
}
