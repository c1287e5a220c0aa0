package wire_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/wire"
)

func TestParseExecution(t *testing.T) {
	ms := int64(5000)
	for _, tc := range []struct {
		raw  string
		want *wire.Execution
		err  string
	}{
		{raw: ``, want: nil},
		{raw: `null`, want: nil},
		{raw: `{"kind":"host"}`, want: &wire.Execution{Kind: "host"}},
		{raw: `{"kind":"host","jail":{"mode":"fs-jail","root":".home"},"netJail":{"mode":"net-jail","allow":["r.example.com"]},"timeoutMs":5000}`,
			want: &wire.Execution{Kind: "host", Jail: &wire.Jail{Mode: "fs-jail", Root: ".home"},
				NetJail: &wire.NetJail{Mode: "net-jail", Allow: []string{"r.example.com"}}, TimeoutMS: &ms}},
		{raw: `{"kind":"sandbox","repoUrl":"https://github.com/a/b","gitRef":"main","capability":"c","ttlSeconds":60}`,
			want: &wire.Execution{Kind: "sandbox", RepoURL: "https://github.com/a/b", GitRef: "main", Capability: "c", TTLSeconds: new(int64(60))}},
		{raw: `{"kind":"host","acquireTimeoutMs":5000}`, want: &wire.Execution{Kind: "host", AcquireTimeoutMS: &ms}},
		{raw: `{"kind":"host","netjail":{}}`, err: "unknown field"},
		{raw: `{"kind":"vm"}`, err: "kind"},
		{raw: `{}`, err: "kind is required"},
		{raw: `{"kind":"host","jail":{"mode":"read-jail"}}`, err: "jail.mode"},
		{raw: `{"kind":"host","netJail":{"mode":"on"}}`, err: "netJail.mode"},
		{raw: `{"kind":"host","timeoutMs":2147483648}`, err: "timeoutMs"},
		{raw: `{"kind":"host","timeoutMs":-1}`, err: "timeoutMs"},
		{raw: `{"kind":"host","gitRef":"main"}`, err: "gitRef"},
		{raw: `{"kind":"sandbox","jail":{"mode":"fs-jail"}}`, err: "jail applies"},
		{raw: `{"kind":"sandbox","repoUrl":"https://user:pw@github.com/a/b"}`, err: "credentials"},
		{raw: `{"kind":"sandbox","repoUrl":"git@github.com:a/b"}`, err: "HTTP(S)"},
		{raw: `{"kind":"host"} {}`, err: "JSON object"},
		{raw: `[]`, err: "JSON object"},
		{raw: `{"kind":"host","Jail":{"mode":"fs-jail"}}`, err: `unknown field "Jail"`},
		{raw: `{"kind":"host","jail":{"Mode":"fs-jail"}}`, err: `unknown field "jail.Mode"`},
	} {
		got, err := wire.ParseExecution([]byte(tc.raw))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseExecution(%s) = %v, want an error mentioning %q", tc.raw, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseExecution(%s) = %v", tc.raw, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseExecution(%s) (-want +got):\n%s", tc.raw, diff)
		}
	}
}

func TestCanonicalAllow(t *testing.T) {
	got, err := wire.CanonicalAllow([]string{"Router.Example.com", "a.example.com:8443", "router.example.com:443", " b.example.com:80 "})
	want := []string{"a.example.com:8443", "b.example.com:80", "router.example.com:443"}
	if err != nil || !cmp.Equal(got, want) {
		t.Errorf("CanonicalAllow() = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"", "-a.example.com", "a.example.com:0", "a.example.com:70000", "a b", "a.example.com:x", "http://a.example.com"} {
		if _, err := wire.CanonicalAllow([]string{bad}); err == nil {
			t.Errorf("CanonicalAllow(%q) = nil error", bad)
		}
	}
}
