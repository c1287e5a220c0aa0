package e2bemu

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"

	"github.com/tangle-network/boxctl/vendors/egress"
	"github.com/tangle-network/boxctl/vendors/emukit"
)

// allTraffic is the CIDR E2B reads as "every destination" (the SDKs'
// ALL_TRAFFIC).
const allTraffic = "0.0.0.0/0"

// egressRules are the egress fields of SandboxNetworkConfig and
// SandboxNetworkUpdateConfig.
type egressRules struct {
	AllowOut []string `json:"allowOut"`
	DenyOut  []string `json:"denyOut"`
}

// errNotEmulated marks network rules this emulator cannot enforce.
var errNotEmulated = errors.New("not emulated")

// egressPolicy reads a sandbox's egress options as E2B does: allowOut
// entries (IP, CIDR or domain, domains matched on ports 80 and 443) take
// precedence over denyOut entries (IP or CIDR), and allow_internet_access
// false is denyOut 0.0.0.0/0. It returns nil for a sandbox that may reach
// anything. A deny list short of 0.0.0.0/0 (deny some, allow the rest) is
// refused (errNotEmulated): the emulator enforces allow lists.
func egressPolicy(allowInternet *bool, r egressRules) (*egress.Policy, error) {
	denyAll := allowInternet != nil && !*allowInternet
	for _, d := range r.DenyOut {
		if d == allTraffic {
			denyAll = true
			continue
		}
		if _, err := netip.ParsePrefix(d); err != nil {
			if _, aerr := netip.ParseAddr(d); aerr != nil {
				return nil, fmt.Errorf("denyOut %q: want an IP address or CIDR block (domains are not supported for deny rules)", d)
			}
		}
	}
	var p egress.Policy
	for _, a := range r.AllowOut {
		rule, err := egress.ParseRule(a)
		if err != nil {
			return nil, fmt.Errorf("allowOut %q: %w", a, err)
		}
		if rule.Port != 0 {
			return nil, fmt.Errorf("allowOut %q: want a CIDR block, an IP address or a domain, without a port", a)
		}
		p.Allow = append(p.Allow, rule)
	}
	switch {
	case denyAll:
		return &p, nil
	case len(r.DenyOut) > 0:
		return nil, fmt.Errorf("denyOut %v without %s (deny some destinations, allow the rest): %w", r.DenyOut, allTraffic, errNotEmulated)
	default:
		return nil, nil
	}
}

// networkRules renders a confined sandbox's policy back as E2B reports it.
func networkRules(p egress.Policy) egressRules {
	r := egressRules{AllowOut: []string{}, DenyOut: []string{allTraffic}}
	for _, rule := range p.Allow {
		r.AllowOut = append(r.AllowOut, rule.String())
	}
	slices.Sort(r.AllowOut)
	return r
}

// updateNetwork is SandboxNetworkUpdateConfig.
type updateNetwork struct {
	egressRules
	AllowInternetAccess *bool `json:"allow_internet_access"`
}

// handleNetwork replaces a running sandbox's egress rules (PUT
// /sandboxes/{sandboxID}/network): 204 once they hold. A sandbox created
// open cannot be confined later (409), nor a confined one opened: the
// emulator confines a sandbox's container from its create on.
func (s *Server) handleNetwork(w http.ResponseWriter, r *http.Request) {
	sb, ok := s.lookup(r.PathValue("sandboxID"))
	if !ok {
		s.notFound(w, r.PathValue("sandboxID"))
		return
	}
	var req updateNetwork
	if !decodeBody(w, r, &req) {
		return
	}
	p, err := egressPolicy(req.AllowInternetAccess, req.egressRules)
	switch {
	case errors.Is(err, errNotEmulated):
		writeJSON(w, http.StatusNotImplemented, map[string]any{"code": http.StatusNotImplemented, "message": err.Error(), "error_code": NotEmulatedCode})
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if p == nil {
		if s.boxes.Confined(sb.id) {
			writeError(w, http.StatusConflict, "network rules of sandbox "+sb.id+": a sandbox created with network rules stays confined (deny "+allTraffic+")")
			return
		}
		w.WriteHeader(http.StatusNoContent) // open, as it was
		return
	}
	if err := s.boxes.SetEgress(r.Context(), sb.id, *p); err != nil {
		if errors.Is(err, emukit.ErrNotConfined) {
			writeError(w, http.StatusConflict, "network rules of sandbox "+sb.id+": "+err.Error())
			return
		}
		writeError(w, http.StatusInternalServerError, "network rules of sandbox "+sb.id+": "+err.Error())
		return
	}
	s.mu.Lock()
	sb.egress = p
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}
