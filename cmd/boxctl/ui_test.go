package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestUI_Flags(t *testing.T) {
	tests := []struct {
		args            []string
		addr, jaegerURL string
		wantErr         string
	}{
		{args: []string{"ui"}, addr: "127.0.0.1:0"},
		{args: []string{"ui", "--addr", "127.0.0.1:7681", "--jaeger-url", "http://127.0.0.1:16686"}, addr: "127.0.0.1:7681", jaegerURL: "http://127.0.0.1:16686"},
		{args: []string{"ui", "extra"}, wantErr: "unknown command"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var got *uiOptions
			a := newApp(&bytes.Buffer{}, &bytes.Buffer{})
			root := newRootCmd(a)
			for _, c := range root.Commands() {
				if c.Name() == "ui" {
					root.RemoveCommand(c)
				}
			}
			root.AddCommand(newUICmd(a, func(_ context.Context, o *uiOptions) error { got = o; return nil }))
			root.SetArgs(tt.args)
			err := root.Execute()
			if tt.wantErr != "" {
				if exitCode(err) != 2 || !strings.Contains(err.Error(), tt.wantErr) || got != nil {
					t.Fatalf("%v: error %v (exit %d), want exit 2 containing %q", tt.args, err, exitCode(err), tt.wantErr)
				}
				return
			}
			if err != nil || got == nil || got.addr != tt.addr || got.jaegerURL != tt.jaegerURL {
				t.Fatalf("%v: %v, options %+v, want addr %q jaeger %q", tt.args, err, got, tt.addr, tt.jaegerURL)
			}
		})
	}
}

func TestUI_Refusals(t *testing.T) {
	t.Setenv("BOXCTL_STATE", filepath.Join(t.TempDir(), "boxes.json"))
	for _, args := range [][]string{{"ui", "--addr", "127.0.0.1:99999"}, {"ui", "--jaeger-url", "ftp://x"}} {
		root := newRootCmd(newApp(&bytes.Buffer{}, &bytes.Buffer{}))
		root.SetArgs(args)
		if err := root.ExecuteContext(t.Context()); exitCode(err) != 2 {
			t.Errorf("%v: %v (exit %d), want exit 2", args, err, exitCode(err))
		}
	}
}
