package open_test

import (
	"testing"

	"github.com/tangle-network/boxctl/vendors/open"
)

// TestSet opens each target's vendor once, refuses an unknown target as
// Vendor does, and closes what it opened.
func TestSet(t *testing.T) {
	env := map[string]string{open.EnvE2BKey: "k", open.EnvE2BURL: "http://127.0.0.1:1", open.EnvE2BDial: "127.0.0.1:1"}
	s := open.NewSet(open.Options{Getenv: func(k string) string { return env[k] }})
	d1, err := s.Vendor("docker")
	if err != nil {
		t.Fatal(err)
	}
	d2, err := s.Vendor("docker")
	if err != nil || d2 != d1 {
		t.Errorf("second Vendor(docker) = %v, %v; want the vendor opened first", d2, err)
	}
	e, err := s.Vendor("e2b")
	if err != nil || e.Name() != "e2b" {
		t.Fatalf("Vendor(e2b) = %v, %v", e, err)
	}
	if v, err := s.Vendor("lambda"); !open.IsConfigError(err) || v != nil {
		t.Errorf("Vendor(lambda) = %v, %v; want a *ConfigError", v, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d3, err := s.Vendor("docker"); err != nil || d3 == d1 {
		t.Errorf("Vendor(docker) after Close = %v, %v; want a vendor opened afresh", d3, err)
	} else {
		_ = s.Close()
	}
}
