package firewall_test

import (
	"errors"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/vendors/egress"
	"github.com/tangle-network/boxctl/vendors/egress/firewall"
)

// A bridge name no interface has: the rules match it and nothing else.
func testBridge(t *testing.T) string {
	t.Helper()
	b := "bxt" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	t.Cleanup(func() {
		if err := firewall.Uninstall(b); err != nil {
			t.Errorf("Uninstall: %v", err)
		}
	})
	return b
}

func TestFirewall_InstallSetBoxReadBack(t *testing.T) {
	br := testBridge(t)
	cfg := firewall.Config{Bridge: br, Gateway: netip.MustParseAddr("10.213.0.1"), HTTPPort: 41080, TLSPort: 41443, DNSPort: 41053,
		Broker: netip.MustParseAddrPort("10.213.0.1:41999")}
	f, err := firewall.Install(cfg)
	if err != nil {
		t.Fatalf("Install: %v", err)
	}
	if ok, err := firewall.Installed(br); !ok || err != nil {
		t.Fatalf("Installed = %v, %v, want true", ok, err)
	}
	box := netip.MustParseAddr("10.213.0.5")
	p, _ := egress.Parse("example.com,10.9.0.0/16:5432")
	if err := f.SetBox(box, p); err != nil {
		t.Fatalf("SetBox: %v", err)
	}
	if err := f.SetBox(box, p); err != nil { // replaces, not adds
		t.Fatalf("SetBox again: %v", err)
	}
	rules, err := firewall.Rules(br)
	if err != nil {
		t.Fatalf("Rules: %v", err)
	}
	idx := func(chain, comment string) int {
		return slices.IndexFunc(rules, func(r firewall.Rule) bool { return r.Chain == chain && r.Comment == comment })
	}
	ll := idx(firewall.ChainForward, "link-local dropped")
	if ll < 0 || rules[ll].Verdict != "drop" || rules[ll].Dst != firewall.LinkLocal {
		t.Fatalf("no link-local drop in forward: %+v", rules)
	}
	if jump := idx(firewall.ChainForward, "per box"); jump < ll {
		t.Errorf("the per-box chain (rule %d) comes before the link-local drop (rule %d)", jump, ll)
	}
	var boxRules []firewall.Rule
	for _, r := range rules {
		if r.Chain == firewall.ChainBoxes {
			boxRules = append(boxRules, r)
		}
	}
	if len(boxRules) != 1 || boxRules[0].Dst != netip.MustParsePrefix("10.9.0.0/16") || boxRules[0].Verdict != "accept" {
		t.Errorf("box rules = %+v, want one accept of 10.9.0.0/16", boxRules)
	}
	if err := f.SetBox(box, egress.Policy{}); err != nil {
		t.Fatalf("SetBox(deny): %v", err)
	}
	rules, _ = firewall.Rules(br)
	if slices.ContainsFunc(rules, func(r firewall.Rule) bool { return r.Chain == firewall.ChainBoxes }) {
		t.Errorf("rules of a denied box remain: %+v", rules)
	}
	if err := f.SetBox(box, egress.Policy{Open: true}); err == nil {
		t.Error("SetBox(open) = nil, want an error")
	}
}

func TestInstall_Invalid(t *testing.T) {
	for _, c := range []firewall.Config{
		{},
		{Bridge: "br-0123456789abcdef", Gateway: netip.MustParseAddr("10.0.0.1"), HTTPPort: 1, TLSPort: 2, DNSPort: 3},
		{Bridge: "br-x", Gateway: netip.MustParseAddr("::1"), HTTPPort: 1, TLSPort: 2, DNSPort: 3},
		{Bridge: "br-x", Gateway: netip.MustParseAddr("10.0.0.1")},
	} {
		if _, err := firewall.Install(c); err == nil {
			t.Errorf("Install(%+v) = nil error", c)
			_ = firewall.Uninstall(c.Bridge)
		}
	}
}

// TestInstall_Held: a bridge whose rules a live process installed is not
// taken over; one whose installer is gone is.
func TestInstall_Held(t *testing.T) {
	br := testBridge(t)
	cfg := firewall.Config{Bridge: br, Gateway: netip.MustParseAddr("10.214.0.1"), HTTPPort: 1, TLSPort: 2, DNSPort: 3}
	// A child installs the table and exits: its table may be taken over.
	cmd := exec.Command(os.Args[0], "-test.run", "^TestHelperInstall$")
	cmd.Env = append(os.Environ(), "FIREWALL_HELPER_BRIDGE="+br)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helper: %v: %s", err, out)
	}
	if _, err := firewall.Install(cfg); err != nil {
		t.Fatalf("Install over a gone process's table: %v", err)
	}
	if _, err := firewall.Install(cfg); err != nil {
		t.Fatalf("Install again from the same process: %v", err)
	}
	if err := firewall.Uninstall(br); err != nil {
		t.Fatal(err)
	}
	// A live child holds it.
	hold := exec.Command(os.Args[0], "-test.run", "^TestHelperInstall$")
	hold.Env = append(os.Environ(), "FIREWALL_HELPER_BRIDGE="+br, "FIREWALL_HELPER_HOLD=1")
	stdout, _ := hold.StdoutPipe()
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hold.Process.Kill(); _ = hold.Wait() })
	buf := make([]byte, 9)
	if _, err := io.ReadFull(stdout, buf); err != nil || string(buf) != "installed" {
		t.Fatalf("helper: %q, %v", buf, err)
	}
	var held *firewall.HeldError
	if _, err := firewall.Install(cfg); !errors.As(err, &held) || held.PID != hold.Process.Pid {
		t.Errorf("Install over a live process's table = %v, want a *HeldError naming it", err)
	}
}

// TestHelperInstall installs the rules of $FIREWALL_HELPER_BRIDGE as
// another process, and with $FIREWALL_HELPER_HOLD waits to be killed.
func TestHelperInstall(t *testing.T) {
	br := os.Getenv("FIREWALL_HELPER_BRIDGE")
	if br == "" {
		return
	}
	if _, err := firewall.Install(firewall.Config{Bridge: br, Gateway: netip.MustParseAddr("10.214.0.1"), HTTPPort: 1, TLSPort: 2, DNSPort: 3}); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("FIREWALL_HELPER_HOLD") != "" {
		os.Stdout.WriteString("installed")
		select {}
	}
}
