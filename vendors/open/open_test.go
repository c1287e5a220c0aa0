package open_test

import (
	"testing"

	"github.com/tangle-network/boxctl/vendors/open"
)

func TestVendor(t *testing.T) {
	tests := []struct {
		name, target string
		env          map[string]string
		wantErr      bool // a *ConfigError
	}{
		{"docker", "docker", nil, false},
		{"docker, ports published", "docker", map[string]string{open.EnvDockerPorts: "published"}, false},
		{"docker, ports direct", "docker", map[string]string{open.EnvDockerPorts: "direct"}, false},
		{"docker, ports unknown", "docker", map[string]string{open.EnvDockerPorts: "nat"}, true},
		{"unknown", "lambda", nil, true},
		{"e2b without key", "e2b", nil, true},
		{"e2b", "e2b", map[string]string{open.EnvE2BKey: "k", open.EnvE2BURL: "http://127.0.0.1:1", open.EnvE2BDial: "127.0.0.1:1"}, false},
		{"e2b bad URL", "e2b", map[string]string{open.EnvE2BKey: "k", open.EnvE2BURL: "::"}, true},
		{"daytona without key", "daytona", nil, true},
		{"daytona", "daytona", map[string]string{open.EnvDaytonaKey: "k", open.EnvDaytonaURL: "http://127.0.0.1:1/api"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := open.Vendor(tt.target, open.Options{Getenv: func(k string) string { return tt.env[k] }})
			if tt.wantErr {
				if !open.IsConfigError(err) || v != nil {
					t.Errorf("Vendor(%s) = %v, %v; want a *ConfigError", tt.target, v, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Vendor(%s) = %v", tt.target, err)
			}
			defer v.Close()
			if v.Name() != tt.target {
				t.Errorf("Vendor(%s).Name() = %q", tt.target, v.Name())
			}
		})
	}
}

func TestImporter(t *testing.T) {
	env := map[string]string{open.EnvE2BKey: "k", open.EnvDaytonaKey: "k"}
	o := open.Options{Getenv: func(k string) string { return env[k] }, DaytonaAPIURL: "http://127.0.0.1:1/api"}
	for target, want := range map[string]bool{"e2b": true, "daytona": true, "docker": false, "registry": false} {
		imp, err := open.Importer(target, o)
		if err != nil || (imp != nil) != want {
			t.Errorf("Importer(%s) = %v, %v; want an importer %v", target, imp, err, want)
		}
	}
}
