package jail

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/wire"
)

func TestParseFloor(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want Floor
		err  string // part of the error; "" for none
	}{
		{name: "unset", env: nil, want: Floor{}},
		{name: "off", env: map[string]string{"BRIDGE_JAIL_MODE": "off", "BRIDGE_NET_JAIL_MODE": "off"}, want: Floor{}},
		{name: "write-jail", env: map[string]string{"BRIDGE_JAIL_MODE": "write-jail"}, want: Floor{Mode: wire.JailWrite}},
		{name: "fs-jail and net-jail", env: map[string]string{"BRIDGE_JAIL_MODE": "fs-jail", "BRIDGE_NET_JAIL_MODE": "net-jail"},
			want: Floor{Mode: wire.JailFS, Net: true}},
		{name: "WORKER_FS_JAIL raises write-jail", env: map[string]string{"BRIDGE_JAIL_MODE": "write-jail", "WORKER_FS_JAIL": "ON"},
			want: Floor{Mode: wire.JailFS}},
		{name: "WORKER_NET_JAIL", env: map[string]string{"WORKER_NET_JAIL": " yes "}, want: Floor{Net: true}},
		{name: "falsy shorthands", env: map[string]string{"WORKER_FS_JAIL": "0", "WORKER_NET_JAIL": "maybe"}, want: Floor{}},
		{name: "misspelt jail mode", env: map[string]string{"BRIDGE_JAIL_MODE": "fs_jail"}, err: "invalid BRIDGE_JAIL_MODE: fs_jail"},
		{name: "jail mode in capitals", env: map[string]string{"BRIDGE_JAIL_MODE": "FS-JAIL"}, err: "expected off|write-jail|fs-jail"},
		{name: "misspelt net jail mode", env: map[string]string{"BRIDGE_NET_JAIL_MODE": "on"}, err: "invalid BRIDGE_NET_JAIL_MODE: on"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseFloor(func(k string) string { return tc.env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("ParseFloor(%v) = %+v, %v, want an error with %q", tc.env, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ParseFloor(%v) = %+v, %v, want %+v", tc.env, got, err, tc.want)
			}
		})
	}
}

// TestFloor_Raise holds the floor to the TypeScript bridge's rule: the
// more confined of floor and request, so a request raises the floor and
// never lowers it.
func TestFloor_Raise(t *testing.T) {
	for _, tc := range []struct {
		name  string
		floor Floor
		req   Request
		want  Request
	}{
		{"no floor keeps the request", Floor{}, Request{Mode: wire.JailWrite, Root: "r"}, Request{Mode: wire.JailWrite, Root: "r"}},
		{"no floor, no request", Floor{}, Request{}, Request{}},
		{"floor confines a request for nothing", Floor{Mode: wire.JailFS, Net: true}, Request{}, Request{Mode: wire.JailFS, Net: true}},
		{"off is raised to the floor", Floor{Mode: wire.JailWrite}, Request{Mode: wire.JailOff}, Request{Mode: wire.JailWrite}},
		{"write-jail is raised to an fs-jail floor", Floor{Mode: wire.JailFS}, Request{Mode: wire.JailWrite, Root: ".agent-home/x"},
			Request{Mode: wire.JailFS, Root: ".agent-home/x"}},
		{"fs-jail raises a write-jail floor", Floor{Mode: wire.JailWrite}, Request{Mode: wire.JailFS}, Request{Mode: wire.JailFS}},
		{"net-jail adds to a file-system floor", Floor{Mode: wire.JailWrite}, Request{Net: true, Allow: []string{"a:1"}},
			Request{Mode: wire.JailWrite, Net: true, Allow: []string{"a:1"}}},
		{"a net floor keeps the request's mode", Floor{Net: true}, Request{Mode: wire.JailFS}, Request{Mode: wire.JailFS, Net: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.floor.Raise(tc.req)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%+v.Raise(%+v) (-want +got):\n%s", tc.floor, tc.req, diff)
			}
			if got := New(Options{Floor: tc.floor}).Resolve(tc.req); !cmp.Equal(got, tc.want) {
				t.Errorf("Resolve(%+v) = %+v, want %+v", tc.req, got, tc.want)
			}
		})
	}
}

// TestJailer_CapsFloor shows the floor in the capabilities: off without
// one, the floor's modes with one, whether or not the jail runs here.
func TestJailer_CapsFloor(t *testing.T) {
	for _, tc := range []struct {
		floor   Floor
		fs, net string
	}{
		{Floor{}, wire.JailOff, wire.NetJailOff},
		{Floor{Mode: wire.JailFS, Net: true}, wire.JailFS, wire.NetJailOn},
		{Floor{Mode: wire.JailWrite}, wire.JailWrite, wire.NetJailOff},
	} {
		c := New(Options{Floor: tc.floor}).Caps() // not probed: only off enforced
		if c.Jail.Floor != tc.fs || c.NetJail.Floor != tc.net {
			t.Errorf("Caps() with floor %+v = jail %+v, net %+v, want floors %s and %s", tc.floor, c.Jail, c.NetJail, tc.fs, tc.net)
		}
	}
}
