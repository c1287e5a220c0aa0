package boxmeta_test

import (
	"slices"
	"testing"

	"github.com/tangle-network/boxctl/internal/boxmeta"
)

func TestFormatPorts(t *testing.T) {
	for _, tc := range []struct {
		ports []int
		want  string
	}{
		{nil, ""},
		{[]int{8080}, "8080"},
		{[]int{9000, 22, 8080, 22}, "22,8080,9000"},
	} {
		if got := boxmeta.FormatPorts(tc.ports); got != tc.want {
			t.Errorf("FormatPorts(%v) = %q, want %q", tc.ports, got, tc.want)
		}
		if got, err := boxmeta.ParsePorts(tc.want); err != nil || !slices.Equal(got, slices.Compact(slices.Sorted(slices.Values(tc.ports)))) {
			t.Errorf("ParsePorts(%q) = %v, %v; want the sorted ports of %v", tc.want, got, err, tc.ports)
		}
	}
	for _, bad := range []string{",", "80,", "http", "0", "65536", "80, 81", "-1"} {
		if got, err := boxmeta.ParsePorts(bad); err == nil {
			t.Errorf("ParsePorts(%q) = %v, want an error", bad, got)
		}
	}
}
