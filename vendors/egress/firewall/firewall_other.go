//go:build !linux

package firewall

import (
	"errors"
	"net/netip"

	"github.com/tangle-network/boxctl/vendors/egress"
)

// errUnsupported is every call's error off Linux: the rules are nf_tables
// rules of a Linux bridge.
var errUnsupported = errors.New("firewall: confining a network's egress needs Linux's nf_tables (run the gate on the engine's Linux host)")

// Firewall holds the rules of one bridge; off Linux there is none.
type Firewall struct{}

// Install fails off Linux.
func Install(Config) (*Firewall, error) { return nil, errUnsupported }

// Uninstall fails off Linux.
func Uninstall(string) error { return errUnsupported }

// Installed fails off Linux.
func Installed(string) (bool, error) { return false, errUnsupported }

// Rules fails off Linux.
func Rules(string) ([]Rule, error) { return nil, errUnsupported }

// SetBox fails off Linux.
func (*Firewall) SetBox(netip.Addr, egress.Policy) error { return errUnsupported }

// RemoveBox fails off Linux.
func (*Firewall) RemoveBox(netip.Addr) error { return errUnsupported }

// Uninstall fails off Linux.
func (*Firewall) Uninstall() error { return errUnsupported }
