package render_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/pool"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/render"
)

func TestPools(t *testing.T) {
	now := time.Unix(1900000000, 0)
	tests := []struct {
		name string
		rows []pool.Summary
		want string
	}{
		{"none", nil, "no pools\n"},
		{"kept here and by the vendor", []pool.Summary{
			{Name: "docker-claude-code-0a1b2c3d", Ready: 3, Orphaned: 1, Keepers: []string{"pid:h:1:2"}},
			{Name: "kubernetes-pi-00000000", VendorKept: true, Ready: 4, Want: 5, Idle: 5, Keepers: []string{}, Oldest: now.Add(-90 * time.Second)},
			{Name: "kubernetes-pi-11111111", VendorKept: true, Keepers: []string{}, Want: 2},
		}, "docker-claude-code-0a1b2c3d\tready 3\torphaned 1\tkeepers pid:h:1:2\n" +
			"kubernetes-pi-00000000\tready 4 of 5\tidle 5\toldest 1m30s\n" +
			"kubernetes-pi-11111111\tready 0 of 2\tidle 0\toldest -\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if err := render.Pools(&b, tt.rows, now); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("Pools wrote\n%q\nwant\n%q", b.String(), tt.want)
			}
		})
	}
}
