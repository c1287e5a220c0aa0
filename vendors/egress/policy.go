package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// DomainPorts are the ports a domain rule can allow: the relay serves
// HTTP on 80 and TLS on 443, nothing else.
var DomainPorts = []uint16{80, 443}

// Open is the keyword of an open policy (Policy.String, Parse).
const Open = "open"

// Policy is a box's egress policy. The zero Policy denies everything but
// the broker.
type Policy struct {
	// Open lets the box reach anything, as a box without a policy does;
	// Allow must then be empty.
	Open bool
	// Allow lists what a box that is not Open may reach.
	Allow []Rule
}

// Rule allows one destination: a domain or a prefix of addresses, on a
// port or on every port its kind allows.
type Rule struct {
	// Domain is a lower-case ASCII name, exact ("example.com") or a
	// wildcard of its subdomains ("*.example.com", which does not match
	// "example.com" itself). Empty for an address rule.
	Domain string
	// Prefix is an IPv4 address (a /32) or CIDR. Invalid for a domain rule.
	Prefix netip.Prefix
	// Port is the one port allowed; 0 allows every port (for a domain:
	// 80 and 443).
	Port uint16
}

// Wildcard reports whether the rule is a "*.suffix" domain rule.
func (r Rule) Wildcard() bool { return strings.HasPrefix(r.Domain, "*.") }

// String renders the rule as ParseRule reads it.
func (r Rule) String() string {
	var s string
	switch {
	case r.Domain != "":
		s = r.Domain
	case r.Prefix.IsSingleIP():
		s = r.Prefix.Addr().String()
	default:
		s = r.Prefix.String()
	}
	if r.Port != 0 {
		s += ":" + strconv.Itoa(int(r.Port))
	}
	return s
}

// MatchHost reports whether the rule allows a connection to name on port.
func (r Rule) MatchHost(name string, port uint16) bool {
	if r.Domain == "" || (r.Port != 0 && r.Port != port) {
		return false
	}
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	if suffix, ok := strings.CutPrefix(r.Domain, "*"); ok {
		return strings.HasSuffix(name, suffix) && len(name) > len(suffix)
	}
	return name == r.Domain
}

// MatchAddr reports whether the rule allows a TCP connection to addr on
// port.
func (r Rule) MatchAddr(addr netip.Addr, port uint16) bool {
	return r.Domain == "" && r.Prefix.Contains(addr.Unmap()) && (r.Port == 0 || r.Port == port)
}

// AllowsHost reports whether p lets a box reach name on port through the
// relay.
func (p Policy) AllowsHost(name string, port uint16) bool {
	if p.Open {
		return true
	}
	return slices.ContainsFunc(p.Allow, func(r Rule) bool { return r.MatchHost(name, port) })
}

// AllowsName reports whether p lets a box resolve name (some domain rule
// names it, on any port).
func (p Policy) AllowsName(name string) bool {
	if p.Open {
		return true
	}
	return slices.ContainsFunc(p.Allow, func(r Rule) bool { return r.MatchHost(name, r.Port) })
}

// AllowsAddr reports whether p lets a box reach addr on TCP port.
func (p Policy) AllowsAddr(addr netip.Addr, port uint16) bool {
	if p.Open {
		return true
	}
	return slices.ContainsFunc(p.Allow, func(r Rule) bool { return r.MatchAddr(addr, port) })
}

// Domains returns the domain rules of p.
func (p Policy) Domains() []Rule {
	return slices.DeleteFunc(slices.Clone(p.Allow), func(r Rule) bool { return r.Domain == "" })
}

// Prefixes returns the address rules of p.
func (p Policy) Prefixes() []Rule {
	return slices.DeleteFunc(slices.Clone(p.Allow), func(r Rule) bool { return r.Domain != "" })
}

// String renders p as Parse reads it: "open", "" (deny all), or the
// rules joined by commas.
func (p Policy) String() string {
	if p.Open {
		return Open
	}
	s := make([]string, len(p.Allow))
	for i, r := range p.Allow {
		s[i] = r.String()
	}
	return strings.Join(s, ",")
}

// Summary renders p for people: "open", "deny" or "deny+" and the rules.
func (p Policy) Summary() string {
	switch {
	case p.Open:
		return Open
	case len(p.Allow) == 0:
		return "deny"
	}
	return "deny+" + p.String()
}

// MarshalText renders p as String does.
func (p Policy) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText reads what MarshalText wrote.
func (p *Policy) UnmarshalText(b []byte) error {
	q, err := Parse(string(b))
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// Validate checks every rule of p, and that an Open policy lists none.
func (p Policy) Validate() error {
	if p.Open && len(p.Allow) > 0 {
		return &RuleError{Rule: p.Allow[0].String(), Err: ErrOpenWithRules}
	}
	for _, r := range p.Allow {
		if _, err := ParseRule(r.String()); err != nil {
			return err
		}
		if r.Domain == "" && r.Prefix != r.Prefix.Masked() {
			return &RuleError{Rule: r.String(), Err: ErrAddress}
		}
	}
	return nil
}

// With returns p with rules added (each once).
func (p Policy) With(rules ...Rule) Policy {
	out := Policy{Open: p.Open, Allow: slices.Clone(p.Allow)}
	for _, r := range rules {
		if !slices.Contains(out.Allow, r) {
			out.Allow = append(out.Allow, r)
		}
	}
	return out
}

// Without returns p without rules.
func (p Policy) Without(rules ...Rule) Policy {
	return Policy{Open: p.Open, Allow: slices.DeleteFunc(slices.Clone(p.Allow), func(r Rule) bool { return slices.Contains(rules, r) })}
}

// Errors of ParseRule and Parse, wrapped in *RuleError.
var (
	// ErrEmpty is an empty rule.
	ErrEmpty = errors.New("empty rule")
	// ErrDomain is a name that is not a valid domain.
	ErrDomain = errors.New("not a valid domain name")
	// ErrWildcard is a wildcard anywhere but as the first label.
	ErrWildcard = errors.New(`a wildcard is only "*." followed by a domain`)
	// ErrPort is a port outside 1-65535, or a domain rule on a port the
	// relay does not serve (80 and 443).
	ErrPort = errors.New("bad port")
	// ErrAddress is an address or CIDR that is not IPv4, or a CIDR with
	// host bits set.
	ErrAddress = errors.New("not an IPv4 address or CIDR (IPv6 egress is never allowed)")
	// ErrOpenWithRules is an allow list beside "open".
	ErrOpenWithRules = errors.New(`"open" allows everything: list no rules beside it`)
)

// RuleError is a rule that does not parse or validate.
type RuleError struct {
	// Rule is the rule as given.
	Rule string
	// Err is one of the Err... values of this package.
	Err error
}

func (e *RuleError) Error() string { return fmt.Sprintf("egress rule %q: %v", e.Rule, e.Err) }

// Unwrap returns Err.
func (e *RuleError) Unwrap() error { return e.Err }

// ParseRule reads one rule: "example.com", "*.npmjs.org:443",
// "10.0.0.0/8", "192.0.2.1:5432", "10.1.0.0/16:443".
func ParseRule(s string) (Rule, error) {
	fail := func(err error) (Rule, error) { return Rule{}, &RuleError{Rule: s, Err: err} }
	host, port := strings.TrimSpace(s), uint16(0)
	if host == "" {
		return fail(ErrEmpty)
	}
	if host == Open {
		return fail(ErrOpenWithRules)
	}
	if strings.HasPrefix(host, "[") || strings.Count(host, ":") > 1 {
		return fail(ErrAddress)
	}
	if h, p, ok := strings.Cut(host, ":"); ok {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return fail(ErrPort)
		}
		host, port = h, uint16(n)
	}
	if pre, err := netip.ParsePrefix(host); err == nil {
		if !pre.Addr().Is4() {
			return fail(ErrAddress)
		}
		if pre != pre.Masked() {
			return fail(ErrAddress)
		}
		return Rule{Prefix: pre, Port: port}, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if !a.Is4() {
			return fail(ErrAddress)
		}
		return Rule{Prefix: netip.PrefixFrom(a, 32), Port: port}, nil
	}
	if strings.Contains(host, "/") || looksNumeric(host) {
		return fail(ErrAddress)
	}
	if port != 0 && !slices.Contains(DomainPorts, port) {
		return fail(ErrPort)
	}
	name, wild := strings.CutPrefix(strings.TrimSuffix(host, "."), "*.")
	if strings.Contains(name, "*") {
		return fail(ErrWildcard)
	}
	ascii, err := idna.Lookup.ToASCII(name)
	if err != nil || !strings.Contains(ascii, ".") || len(ascii) > 253 {
		return fail(ErrDomain)
	}
	if wild {
		ascii = "*." + ascii
	}
	return Rule{Domain: ascii, Port: port}, nil
}

// looksNumeric reports a host made of digits, dots and slashes only: a
// malformed address, not a domain.
func looksNumeric(s string) bool {
	return strings.Trim(s, "0123456789./") == ""
}

// ParseRules reads rules; the errors of every bad rule are joined.
func ParseRules(ss []string) ([]Rule, error) {
	var (
		out  []Rule
		errs []error
	)
	for _, s := range ss {
		r, err := ParseRule(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out, errors.Join(errs...)
}

// Parse reads a policy as Policy.String renders it: "open", "" (deny
// all) or comma-separated rules.
func Parse(s string) (Policy, error) {
	s = strings.TrimSpace(s)
	if s == Open {
		return Policy{Open: true}, nil
	}
	if s == "" {
		return Policy{}, nil
	}
	rules, err := ParseRules(strings.Split(s, ","))
	if err != nil {
		return Policy{}, err
	}
	return Policy{Allow: rules}, nil
}

// FromFlags builds a policy from a command's flags: open (from
// "--egress open") or the --allow rules, not both.
func FromFlags(open bool, allow []string) (Policy, error) {
	rules, err := ParseRules(allow)
	if err != nil {
		return Policy{}, err
	}
	if open && len(rules) > 0 {
		return Policy{}, &RuleError{Rule: rules[0].String(), Err: ErrOpenWithRules}
	}
	return Policy{Open: open, Allow: rules}, nil
}
