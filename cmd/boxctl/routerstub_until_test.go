package main

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/polltest"
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
			polltest.UntilNil(t, 10*time.Second, fmt.Sprintf("router-stub %v to end its lifetime", args), func() error {
				if strings.Contains(errOut.String(), "lifetime over") {
					return nil
				}
				return fmt.Errorf("stderr: %s", errOut)
			})
			if err := stop(); err != nil {
				t.Errorf("router-stub %v ended with %v, want nil", args, err)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("router-stub %v ran %v", args, took)
			}
		})
	}
}
