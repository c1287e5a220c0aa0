package vendorhttp_test

import (
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/vendorhttp"
)

func TestDefaults(t *testing.T) {
	c, l := vendorhttp.Defaults(nil, nil)
	if c == nil || c.Transport == nil || c.Timeout != 0 || l == nil {
		t.Fatalf("Defaults(nil, nil) = %+v, %v", c, l)
	}
	if c.Transport == http.DefaultTransport {
		t.Error("the default client shares http.DefaultTransport")
	}
	mine, myLog := &http.Client{}, slog.Default()
	if c, l := vendorhttp.Defaults(mine, myLog); c != mine || l != myLog {
		t.Errorf("Defaults replaced a given client or logger")
	}
}

func TestCheckCreate(t *testing.T) {
	tests := []struct {
		poll     time.Duration
		attempts int
		want     string
	}{
		{time.Second, 1, ""},
		{0, 1, "box: poll interval 0s must be positive"},
		{time.Second, 0, "box: create attempts 0: want at least 1"},
		{-time.Second, 0, "box: poll interval -1s must be positive"},
	}
	for _, tt := range tests {
		got := ""
		if err := vendorhttp.CheckCreate("box", tt.poll, tt.attempts); err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("CheckCreate(%v, %d) = %q, want %q", tt.poll, tt.attempts, got, tt.want)
		}
	}
}
