package main

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestRouterStub_Until(t *testing.T) {
	until := strconv.FormatInt(time.Now().Add(2*time.Second).Unix(), 10)
	for _, args := range [][]string{
		{"router-stub", "--no-auth", "--lifetime", "500ms"},
		{"router-stub", "--no-auth", "--until", until},
	} {
		t.Run(strings.Join(args[2:], " "), func(t *testing.T) {
			start := time.Now()
			_, errOut, stop := startRouterStub(t, args...)
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(errOut.String(), "lifetime over") {
				if time.Now().After(deadline) {
					t.Fatalf("router-stub %v still runs after 10s; stderr: %s", args, errOut)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err := stop(); err != nil {
				t.Errorf("router-stub %v ended with %v, want nil", args, err)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("router-stub %v ran %v", args, took)
			}
		})
	}
}
