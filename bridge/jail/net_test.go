package jail

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseEndpoint(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want endpoint
		err  bool
	}{
		{url: "http://127.0.0.1:8080", want: endpoint{dial: "127.0.0.1:8080", allow: "127.0.0.1:8080", listen: "127.0.0.1:8080", url: "http://127.0.0.1:8080"}},
		{url: "https://Router.Example.com/v1", want: endpoint{dial: "router.example.com:443", allow: "router.example.com:443",
			listen: "127.0.0.1:10443", name: "router.example.com", url: "https://router.example.com:10443/v1"}},
		{url: "https://router.example.com:8443/v1", want: endpoint{dial: "router.example.com:8443", allow: "router.example.com:8443",
			listen: "127.0.0.1:8443", name: "router.example.com", url: "https://router.example.com:8443/v1"}},
		{url: "http://[::1]:9000/", want: endpoint{dial: "[::1]:9000", allow: "::1:9000", listen: "[::1]:9000", url: "http://[::1]:9000/"}},
		{url: "http://172.17.0.1:80/v1", want: endpoint{dial: "172.17.0.1:80", allow: "172.17.0.1:80", listen: "127.0.0.1:10080",
			url: "http://127.0.0.1:10080/v1"}},
		{url: "https://10.0.0.5/v1", err: true},
		{url: "", err: true},
		{url: "ftp://router.example.com", err: true},
	} {
		got, err := parseEndpoint(tc.url)
		if tc.err {
			if err == nil {
				t.Errorf("parseEndpoint(%q) = %+v, want an error", tc.url, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseEndpoint(%q) = %v", tc.url, err)
			continue
		}
		if diff := cmp.Diff(tc.want, *got, cmp.AllowUnexported(endpoint{})); diff != "" {
			t.Errorf("parseEndpoint(%q) (-want +got):\n%s", tc.url, diff)
		}
	}
}
