package sandbox_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/tangle-network/boxctl/provider/sandbox"
)

func TestRouterFromEnv(t *testing.T) {
	tests := []struct {
		name        string
		url         string
		env         map[string]string
		want        sandbox.Router
		wantMissing []string
	}{
		{name: "both from the environment", env: map[string]string{sandbox.RouterURLEnv: "https://r.example", sandbox.RouterKeyEnv: "k1"},
			want: sandbox.Router{URL: "https://r.example", Key: "k1"}},
		{name: "the URL given wins", url: "https://given.example",
			env:  map[string]string{sandbox.RouterURLEnv: "https://r.example", sandbox.RouterKeyEnv: "k2"},
			want: sandbox.Router{URL: "https://given.example", Key: "k2"}},
		{name: "URL given, no key", url: "https://given.example", wantMissing: []string{sandbox.RouterKeyEnv}},
		{name: "no URL", env: map[string]string{sandbox.RouterKeyEnv: "k"}, wantMissing: []string{sandbox.RouterURLEnv}},
		{name: "nothing", wantMissing: []string{sandbox.RouterURLEnv, sandbox.RouterKeyEnv}},
		{name: "the URL is not checked", url: "not a url", env: map[string]string{sandbox.RouterKeyEnv: "k"},
			want: sandbox.Router{URL: "not a url", Key: "k"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := sandbox.RouterFromEnv(tt.url, func(k string) string { return tt.env[k] })
			var missing *sandbox.MissingRouterEnvError
			if tt.wantMissing != nil {
				if !errors.As(err, &missing) || !slices.Equal(missing.Vars, tt.wantMissing) {
					t.Fatalf("RouterFromEnv = %+v, %v; want missing %v", r, err, tt.wantMissing)
				}
				return
			}
			if err != nil || r != tt.want {
				t.Fatalf("RouterFromEnv = %+v, %v; want %+v", r, err, tt.want)
			}
		})
	}
}
