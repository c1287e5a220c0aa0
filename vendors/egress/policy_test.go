package egress_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tangle-network/boxctl/vendors/egress"
)

func TestParseRule(t *testing.T) {
	tests := []struct {
		in      string
		want    egress.Rule
		wantErr error
	}{
		{in: "example.com", want: egress.Rule{Domain: "example.com"}},
		{in: "Example.COM.", want: egress.Rule{Domain: "example.com"}},
		{in: "*.npmjs.org:443", want: egress.Rule{Domain: "*.npmjs.org", Port: 443}},
		{in: "registry.npmjs.org:80", want: egress.Rule{Domain: "registry.npmjs.org", Port: 80}},
		{in: "bücher.example", want: egress.Rule{Domain: "xn--bcher-kva.example"}},
		{in: "10.0.0.0/8", want: egress.Rule{Prefix: netip.MustParsePrefix("10.0.0.0/8")}},
		{in: "10.1.0.0/16:443", want: egress.Rule{Prefix: netip.MustParsePrefix("10.1.0.0/16"), Port: 443}},
		{in: "192.0.2.1:5432", want: egress.Rule{Prefix: netip.MustParsePrefix("192.0.2.1/32"), Port: 5432}},
		{in: "192.0.2.1", want: egress.Rule{Prefix: netip.MustParsePrefix("192.0.2.1/32")}},
		{in: "", wantErr: egress.ErrEmpty},
		{in: "open", wantErr: egress.ErrOpenWithRules},
		{in: "localhost", wantErr: egress.ErrDomain},
		{in: "exa mple.com", wantErr: egress.ErrDomain},
		{in: "-bad.example", wantErr: egress.ErrDomain},
		{in: "a.*.example.com", wantErr: egress.ErrWildcard},
		{in: "*example.com", wantErr: egress.ErrWildcard},
		{in: "example.com:22", wantErr: egress.ErrPort},
		{in: "example.com:0", wantErr: egress.ErrPort},
		{in: "192.0.2.1:70000", wantErr: egress.ErrPort},
		{in: "192.0.2.1:x", wantErr: egress.ErrPort},
		{in: "10.0.0.1/8", wantErr: egress.ErrAddress},
		{in: "300.1.1.1", wantErr: egress.ErrAddress},
		{in: "10.0.0.0/33", wantErr: egress.ErrAddress},
		{in: "2001:db8::1", wantErr: egress.ErrAddress},
		{in: "[2001:db8::1]:443", wantErr: egress.ErrAddress},
		{in: "::/0", wantErr: egress.ErrAddress},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := egress.ParseRule(tt.in)
			if tt.wantErr != nil {
				var re *egress.RuleError
				if !errors.As(err, &re) || !errors.Is(err, tt.wantErr) || re.Rule != tt.in {
					t.Fatalf("ParseRule(%q) error = %v, want a *RuleError of %v", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseRule(%q): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateComparable(netip.Prefix{})); diff != "" {
				t.Errorf("ParseRule(%q) (-want +got):\n%s", tt.in, diff)
			}
			again, err := egress.ParseRule(got.String())
			if err != nil || again != got {
				t.Errorf("ParseRule(%q.String()=%q) = %v, %v, want the same rule", tt.in, got.String(), again, err)
			}
		})
	}
}

func mustPolicy(t *testing.T, s string) egress.Policy {
	t.Helper()
	p, err := egress.Parse(s)
	if err != nil {
		t.Fatalf("Parse(%q): %v", s, err)
	}
	return p
}

func TestPolicy_AllowsHost(t *testing.T) {
	p := mustPolicy(t, "example.com,*.npmjs.org:443,git.example.org:80")
	tests := []struct {
		name string
		port uint16
		want bool
	}{
		{"example.com", 443, true},
		{"EXAMPLE.com.", 80, true},
		{"www.example.com", 443, false},
		{"registry.npmjs.org", 443, true},
		{"a.b.npmjs.org", 443, true},
		{"npmjs.org", 443, false},
		{"registry.npmjs.org", 80, false},
		{"evilnpmjs.org", 443, false},
		{"git.example.org", 80, true},
		{"git.example.org", 443, false},
		{"other.test", 443, false},
	}
	for _, tt := range tests {
		if got := p.AllowsHost(tt.name, tt.port); got != tt.want {
			t.Errorf("AllowsHost(%q, %d) = %v, want %v", tt.name, tt.port, got, tt.want)
		}
	}
	for name, want := range map[string]bool{"git.example.org": true, "a.npmjs.org": true, "npmjs.org": false, "other.test": false} {
		if got := p.AllowsName(name); got != want {
			t.Errorf("AllowsName(%q) = %v, want %v", name, got, want)
		}
	}
	if !(egress.Policy{Open: true}).AllowsHost("anything.test", 22) {
		t.Error("an open policy refuses a host")
	}
	if (egress.Policy{}).AllowsName("example.com") {
		t.Error("the zero policy allows a name")
	}
}

func TestPolicy_AllowsAddr(t *testing.T) {
	p := mustPolicy(t, "10.0.0.0/8,192.0.2.1:5432,example.com")
	tests := []struct {
		addr string
		port uint16
		want bool
	}{
		{"10.2.3.4", 22, true},
		{"11.0.0.1", 22, false},
		{"192.0.2.1", 5432, true},
		{"192.0.2.1", 5433, false},
		{"::ffff:10.0.0.1", 80, true},
		{"169.254.169.254", 80, false},
	}
	for _, tt := range tests {
		if got := p.AllowsAddr(netip.MustParseAddr(tt.addr), tt.port); got != tt.want {
			t.Errorf("AllowsAddr(%s, %d) = %v, want %v", tt.addr, tt.port, got, tt.want)
		}
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		summary string
		wantErr error
	}{
		{in: "", want: "", summary: "deny"},
		{in: "open", want: "open", summary: "open"},
		{in: "example.com, 10.0.0.0/8:22,example.com", want: "example.com,10.0.0.0/8:22", summary: "deny+example.com,10.0.0.0/8:22"},
		{in: "open,example.com", wantErr: egress.ErrOpenWithRules},
		{in: "example.com,,x", wantErr: egress.ErrEmpty},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			p, err := egress.Parse(tt.in)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Parse(%q) error = %v, want %v", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if p.String() != tt.want || p.Summary() != tt.summary {
				t.Errorf("Parse(%q) = %q (%q), want %q (%q)", tt.in, p.String(), p.Summary(), tt.want, tt.summary)
			}
			if err := p.Validate(); err != nil {
				t.Errorf("Validate(): %v", err)
			}
		})
	}
}

func TestFromFlags(t *testing.T) {
	if _, err := egress.FromFlags(true, []string{"example.com"}); !errors.Is(err, egress.ErrOpenWithRules) {
		t.Errorf("FromFlags(open, rules) error = %v, want ErrOpenWithRules", err)
	}
	_, err := egress.FromFlags(false, []string{"example.com:22", "10.0.0.1/8"})
	if !errors.Is(err, egress.ErrPort) || !errors.Is(err, egress.ErrAddress) {
		t.Errorf("FromFlags(two bad rules) error = %v, want both errors", err)
	}
	p, err := egress.FromFlags(false, []string{"example.com"})
	if err != nil || p.Open || len(p.Allow) != 1 {
		t.Errorf("FromFlags(false, [example.com]) = %+v, %v", p, err)
	}
}

func TestPolicy_WithWithout(t *testing.T) {
	p := mustPolicy(t, "example.com")
	r, _ := egress.ParseRule("10.0.0.0/8")
	q := p.With(r, r)
	if q.String() != "example.com,10.0.0.0/8" || p.String() != "example.com" {
		t.Errorf("With = %q (p %q)", q.String(), p.String())
	}
	if got := q.Without(p.Allow[0]).String(); got != "10.0.0.0/8" {
		t.Errorf("Without = %q, want 10.0.0.0/8", got)
	}
}
