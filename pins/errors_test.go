package pins_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/pins"
)

func TestVerify_mismatchError(t *testing.T) {
	reg, good := fakeWorld(t)
	client, err := pins.NewRegistry(reg.URL)
	if err != nil {
		t.Fatal(err)
	}
	const forged = "sha512-" + "Zm9yZ2VkZm9yZ2VkZm9yZ2VkZm9yZ2VkZm9yZ2VkZm9yZ2VkZm9yZ2VkZm9yZ2VkZm9yZ2VkZm9yZ2VkZm9yZ2VkZm9yZ2VkZm9yZ2VkZm9yZ2VkZm9yZ2VkZm9yZw=="
	tests := []struct {
		name   string
		mutate func(p *pins.Pins)
		// want are substrings of the error, in order.
		want []string
	}{
		{"harness integrity differs", func(p *pins.Pins) { p.Harnesses[0].Integrity = forged },
			[]string{"1 of 6 pins disagree with the npm registry",
				"fake: @acme/fake-cli@1.0.0: integrity differs from the registry's",
				"pinned " + forged + ", registry serves " + good.Harnesses[0].Integrity,
				"then run `boxctl pins bump fake 1.0.0`"}},
		{"platform package unpublished", func(p *pins.Pins) { p.Harnesses[0].Platforms[0].Version = "0.0.1" },
			[]string{"fake: @acme/fake-cli-linux-x64@0.0.1 (linux/amd64): version not in the registry",
				"run `boxctl pins bump fake` to pin a published version"}},
		{"node integrity differs", func(p *pins.Pins) { p.Node.NPM.Integrity = forged },
			[]string{"node: npm@10.9.9: integrity differs", "pinned " + forged, "correct the node section of pins.json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := good.Clone()
			tt.mutate(p)
			_, err := pins.Verify(t.Context(), p, client)
			var me *pins.MismatchError
			if !errors.As(err, &me) || !errors.Is(err, pins.ErrMismatch) {
				t.Fatalf("Verify() = %v, want a *MismatchError matching ErrMismatch", err)
			}
			if len(me.Failed) != 1 || me.Total != 6 {
				t.Errorf("Verify() failed %d of %d, want 1 of 6", len(me.Failed), me.Total)
			}
			msg := err.Error()
			for _, w := range tt.want {
				i := strings.Index(msg, w)
				if i < 0 {
					t.Fatalf("Verify() error =\n%s\nwant it to contain %q", err, w)
				}
				msg = msg[i+len(w):]
			}
		})
	}
}

func TestSelect_unknownHarness(t *testing.T) {
	_, p := fakeWorld(t)
	for _, call := range []struct {
		name string
		err  error
	}{
		{"Select", func() error { _, err := p.Select([]string{"fake", "nope"}); return err }()},
		{"Bump", func() error { _, err := pins.Bump(t.Context(), p, "nope", "", nil, nil); return err }()},
	} {
		t.Run(call.name, func(t *testing.T) {
			var ue *pins.UnknownHarnessError
			if !errors.As(call.err, &ue) || !errors.Is(call.err, pins.ErrUnknownHarness) {
				t.Fatalf("%s(nope) = %v, want an *UnknownHarnessError", call.name, call.err)
			}
			if diff := cmp.Diff(pins.UnknownHarnessError{Name: "nope", Known: []string{"fake"}}, *ue); diff != "" {
				t.Errorf("%s(nope) error (-want +got):\n%s", call.name, diff)
			}
			if want := `unknown harness "nope" (known: fake)`; !strings.Contains(call.err.Error(), want) {
				t.Errorf("%s(nope) = %q, want it to contain %q", call.name, call.err, want)
			}
		})
	}
}
