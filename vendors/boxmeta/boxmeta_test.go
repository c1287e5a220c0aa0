package boxmeta_test

import (
	"slices"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/vendors/boxmeta"
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

func TestFormatIdle(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{3 * time.Second, "3s"},
		{1500 * time.Millisecond, "1.5s"},
		{time.Millisecond + 1, "2ms"},
		{90 * time.Minute, "1h30m0s"},
	} {
		got := boxmeta.FormatIdle(tc.d)
		if got != tc.want {
			t.Errorf("FormatIdle(%v) = %q, want %q", tc.d, got, tc.want)
		}
		if d, err := boxmeta.ParseIdle(got); err != nil || d < tc.d {
			t.Errorf("ParseIdle(%q) = %v, %v; want at least %v", got, d, err, tc.d)
		}
	}
	for _, bad := range []string{"", "0s", "-1s", "300"} {
		if d, err := boxmeta.ParseIdle(bad); err == nil {
			t.Errorf("ParseIdle(%q) = %v, want an error", bad, d)
		}
	}
}
