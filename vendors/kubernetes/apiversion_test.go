package kubernetes

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// TestCheckAPI: a cluster serving agent-sandbox's groups at v1beta1 passes
// (and is asked once); one serving v1alpha1 only, or no group at all,
// fails with an APIVersionError naming what it serves.
func TestCheckAPI(t *testing.T) {
	tests := []struct {
		name   string
		served map[string][]string // group -> versions; missing: 404
		groups []string
		want   *APIVersionError
	}{
		{"v1beta1", map[string][]string{groupAgents: {"v1beta1"}, groupExtensions: {"v1beta1"}}, []string{groupAgents, groupExtensions}, nil},
		{"v0.5 serves both", map[string][]string{groupAgents: {"v1beta1", "v1alpha1"}}, []string{groupAgents}, nil},
		{"v1alpha1 only", map[string][]string{groupAgents: {"v1alpha1"}}, []string{groupAgents},
			&APIVersionError{Group: groupAgents, Served: []string{"v1alpha1"}, Want: "v1beta1"}},
		{"no extensions", map[string][]string{groupAgents: {"v1beta1"}}, []string{groupAgents, groupExtensions},
			&APIVersionError{Group: groupExtensions, Served: []string{}, Want: "v1beta1"}},
		{"not installed", nil, []string{groupAgents},
			&APIVersionError{Group: groupAgents, Served: []string{}, Want: "v1beta1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				for g, versions := range tt.served {
					if r.URL.Path != "/apis/"+g {
						continue
					}
					ag := metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: g}
					for _, ver := range versions {
						ag.Versions = append(ag.Versions, metav1.GroupVersionForDiscovery{GroupVersion: g + "/" + ver, Version: ver})
					}
					w.Header().Set("Content-Type", "application/json")
					_ = json.NewEncoder(w).Encode(ag)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusNotFound)
				_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
					Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound, Message: "the server could not find the requested resource"})
			}))
			t.Cleanup(srv.Close)
			v, err := New(WithRESTConfig(&rest.Config{Host: srv.URL}))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = v.Close() })
			err = v.checkAPI(t.Context(), tt.groups...)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("checkAPI = %v, want nil", err)
				}
				n := calls.Load()
				if err := v.checkAPI(t.Context(), tt.groups...); err != nil || calls.Load() != n {
					t.Errorf("second checkAPI = %v after %d more requests, want nil after none", err, calls.Load()-n)
				}
				return
			}
			got, ok := errors.AsType[*APIVersionError](err)
			if !ok {
				t.Fatalf("checkAPI = %v, want an *APIVersionError", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("checkAPI error (-want +got):\n%s", diff)
			}
			for _, w := range append([]string{tt.want.Group + "/" + tt.want.Want}, tt.want.Served...) {
				if !strings.Contains(got.Error(), w) {
					t.Errorf("message %q does not name %s", got.Error(), w)
				}
			}
		})
	}
}
