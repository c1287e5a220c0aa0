package main

import (
	"errors"
	"testing"
	"time"
)

// TestBenchOptions_resolve: bad flags are usage errors before anything
// runs, and no Router in the environment means the local endpoint.
func TestBenchOptions_resolve(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		name      string
		o         benchOptions
		wantErr   bool
		wantLocal bool
	}{
		{"defaults", benchOptions{target: "docker", burst: 10, turns: 10, pause: time.Second}, false, true},
		{"unknown target", benchOptions{target: "nowhere", burst: 1, turns: 1}, true, false},
		{"no burst", benchOptions{target: "docker", burst: 0, turns: 1}, true, false},
		{"negative pause", benchOptions{target: "docker", burst: 1, turns: 1, pause: -time.Second}, true, false},
		{"negative settle", benchOptions{target: "docker", burst: 1, turns: 1, settle: -time.Second}, true, false},
		{"unknown workload", benchOptions{target: "docker", burst: 1, turns: 1, workloads: []string{"sprint"}}, true, false},
		{"unknown mode", benchOptions{target: "docker", burst: 1, turns: 1, modes: []string{"warm"}}, true, false},
		{"modes", benchOptions{target: "docker", burst: 1, turns: 1, modes: []string{"no-spare", "pool"}, workloads: []string{"first-event"}}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.o
			err := o.resolve(getenv)
			var ue usageError
			// An unknown target is the vendor package's own error, as for
			// every box command.
			if tt.wantErr != (err != nil) || (err != nil && tt.o.target == "docker" && !errors.As(err, &ue)) {
				t.Fatalf("resolve = %v, want a usage error %v", err, tt.wantErr)
			}
			if err == nil && o.local != tt.wantLocal {
				t.Errorf("local = %v, want %v", o.local, tt.wantLocal)
			}
		})
	}
}
