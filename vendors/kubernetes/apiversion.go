package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	agentsv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
)

// APIVersion is the version of agent-sandbox's API groups the vendor
// speaks. agent-sandbox v0.5 serves it beside v1alpha1, v1.0 and later
// serve it alone; earlier releases serve only v1alpha1, which the vendor
// does not speak.
const APIVersion = "v1beta1"

// The API groups: boxes need the first, warm pools the second (the
// controller's extensions).
var (
	groupAgents     = agentsv1.GroupVersion.Group
	groupExtensions = extv1.GroupVersion.Group
)

// APIVersionError is a cluster that does not serve an agent-sandbox API
// group at APIVersion: agent-sandbox before v0.5, or none installed.
type APIVersionError struct {
	// Group is the API group (agents.x-k8s.io, extensions.agents.x-k8s.io).
	Group string
	// Served are the versions of Group the cluster serves: none when it
	// serves no such group.
	Served []string
	// Want is the version the vendor needs: APIVersion.
	Want string
}

func (e *APIVersionError) Error() string {
	if len(e.Served) == 0 {
		return fmt.Sprintf("kubernetes: the cluster does not serve %s; the vendor needs %s/%s (agent-sandbox v0.5 or later, with its extensions for warm pools)",
			e.Group, e.Group, e.Want)
	}
	return fmt.Sprintf("kubernetes: the cluster serves %s at %s; the vendor needs %s/%s (agent-sandbox v0.5 or later)",
		e.Group, strings.Join(e.Served, ", "), e.Group, e.Want)
}

// checkAPI asks the cluster's discovery, once per vendor and group, that
// it serves each of groups at APIVersion: a request to a version it does
// not serve would fail as a box not found.
func (v *Vendor) checkAPI(ctx context.Context, groups ...string) error {
	for _, g := range groups {
		v.mu.Lock()
		ok := v.served[g]
		v.mu.Unlock()
		if ok {
			continue
		}
		raw, err := v.core.Discovery().RESTClient().Get().AbsPath("/apis", g).DoRaw(ctx)
		var group metav1.APIGroup
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("kubernetes: discovery of %s: %w", g, v.mapErr(err, ""))
		default:
			if err := json.Unmarshal(raw, &group); err != nil {
				return fmt.Errorf("kubernetes: discovery of %s: %w", g, err)
			}
		}
		served := make([]string, 0, len(group.Versions))
		for _, gv := range group.Versions {
			served = append(served, gv.Version)
		}
		if !slices.Contains(served, APIVersion) {
			return &APIVersionError{Group: g, Served: served, Want: APIVersion}
		}
		v.mu.Lock()
		v.served[g] = true
		v.mu.Unlock()
	}
	return nil
}
