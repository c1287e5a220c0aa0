package provider

import (
	"errors"
	"fmt"
)

// CheckCreate refuses a request that Provider.Create would refuse for its
// own content (profile name, workspace, model route), without any request
// to a bridge: a launcher that creates a bridge first (the sandbox
// provider) runs it before spending a box on the request.
func CheckCreate(req CreateRequest) error {
	if req.Profile.Name == "" {
		return errors.New("create environment: profile name is required")
	}
	if err := checkWorkspace(Options{}, &req); err != nil {
		return fmt.Errorf("create environment: %w", err)
	}
	if req.Backend != "" || req.Profile.Harness != "" || req.Profile.Model.Default != "" {
		if _, err := resolveModel(Options{}, &req, ""); err != nil {
			return fmt.Errorf("create environment: %w", err)
		}
	}
	return nil
}
