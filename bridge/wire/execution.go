package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Execution kinds: where a turn's harness runs.
const (
	ExecutionHost    = "host"
	ExecutionSandbox = "sandbox"
)

// Jail modes (execution.jail.mode): off; write-jail, where the harness
// writes only inside its project directory; fs-jail, where it also reads
// only there and in the system paths it needs.
const (
	JailOff   = "off"
	JailWrite = "write-jail"
	JailFS    = "fs-jail"
)

// Network jail modes (execution.netJail.mode): off, or net-jail, where the
// harness reaches the model endpoint and nothing else.
const (
	NetJailOff = "off"
	NetJailOn  = "net-jail"
)

// MaxExecutionTimeoutMS is the largest execution.timeoutMs (and
// acquireTimeoutMs), as in the TypeScript bridge: the largest timer Node
// keeps.
const MaxExecutionTimeoutMS = 2_147_483_647

// Error types of execution refusals, as the TypeScript bridge names them.
const (
	// TypeNotConfigured is a confinement the bridge cannot enforce on this
	// host (no bubblewrap, no user namespaces); it refuses to run the turn
	// unconfined (501).
	TypeNotConfigured = "not_configured"
	// TypeExecutorMisconfigured is a network jail the bridge cannot put in
	// force for the request: with kind sandbox, with an allow list other
	// than the enforced one, or without a model endpoint (501).
	TypeExecutorMisconfigured = "executor_misconfigured"
	// TypeCapabilityDenied is an execution a route does not offer, such as
	// a retained native session in a sandbox (501).
	TypeCapabilityDenied = "capability_denied"
	// TypeSandboxUnsupported is execution.kind sandbox on a bridge that
	// cannot provision a sandbox; the message says what to use instead
	// (400).
	TypeSandboxUnsupported = "sandbox_unsupported"
)

// Execution is the `execution` object of a chat request or a session:
// where and under which confinement the harness runs. Host execution uses
// Jail, NetJail, TimeoutMS and AcquireTimeoutMS; sandbox execution
// RepoURL, GitRef, Capability, TTLSeconds, NetJail and TimeoutMS.
type Execution struct {
	Kind       string   `json:"kind"`
	Jail       *Jail    `json:"jail,omitempty"`
	NetJail    *NetJail `json:"netJail,omitempty"`
	TimeoutMS  *int64   `json:"timeoutMs,omitempty"`
	RepoURL    string   `json:"repoUrl,omitempty"`
	GitRef     string   `json:"gitRef,omitempty"`
	Capability string   `json:"capability,omitempty"`
	TTLSeconds *int64   `json:"ttlSeconds,omitempty"`
	// AcquireTimeoutMS is how long the turn may wait for an executor slot;
	// a bridge that answers 429 at once honours every value.
	AcquireTimeoutMS *int64 `json:"acquireTimeoutMs,omitempty"`
}

// Jail is host file-system confinement: Mode off, write-jail or fs-jail;
// Root the jailed harness's writable home, inside the project directory.
type Jail struct {
	Mode string `json:"mode,omitempty"`
	Root string `json:"root,omitempty"`
}

// NetJail is network confinement: Mode off or net-jail. Allow asserts the
// enforced allow list (host:port entries, a bare host meaning port 443);
// it does not change it.
type NetJail struct {
	Mode  string   `json:"mode,omitempty"`
	Allow []string `json:"allow,omitempty"`
}

// JailMode is the jail mode asked for ("off" when none).
func (e *Execution) JailMode() string {
	if e == nil || e.Jail == nil || e.Jail.Mode == "" {
		return JailOff
	}
	return e.Jail.Mode
}

// NetJailed reports whether the execution asks for the network jail.
func (e *Execution) NetJailed() bool {
	return e != nil && e.NetJail != nil && e.NetJail.Mode == NetJailOn
}

// ParseExecution decodes and checks an `execution` object; null or absent
// is nil. Unknown fields, an unknown kind or mode, a field of the other
// kind, and numbers out of range are errors (a bridge answers them 400): a
// misspelt confinement must never run unconfined.
func ParseExecution(raw json.RawMessage) (*Execution, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	if err := exactKeys(raw, executionKeys, ""); err != nil {
		return nil, fmt.Errorf("execution: %w", err)
	}
	var e Execution
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return nil, fmt.Errorf("execution: %w", err)
	}
	if err := e.validate(); err != nil {
		return nil, fmt.Errorf("execution: %w", err)
	}
	return &e, nil
}

// executionKeys are the field names of an execution object, and of its
// objects.
var executionKeys = map[string]map[string]bool{
	"":        {"kind": true, "jail": true, "netJail": true, "timeoutMs": true, "repoUrl": true, "gitRef": true, "capability": true, "ttlSeconds": true, "acquireTimeoutMs": true},
	"jail":    {"mode": true, "root": true},
	"netJail": {"mode": true, "allow": true},
}

// exactKeys checks the keys of the object raw (named name) exactly, as
// the TypeScript bridge's strict schema does: encoding/json matches field
// names without regard to case.
func exactKeys(raw []byte, keys map[string]map[string]bool, name string) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		if name == "" {
			return errors.New("must be a JSON object")
		}
		return nil // the typed decode says what is wrong
	}
	for k, v := range obj {
		if !keys[name][k] {
			field := k
			if name != "" {
				field = name + "." + k
			}
			return fmt.Errorf("unknown field %q", field)
		}
		if _, nested := keys[k]; nested && name == "" {
			if err := exactKeys(v, keys, k); err != nil {
				return err
			}
		}
	}
	return nil
}

func (e *Execution) validate() error {
	switch e.Kind {
	case ExecutionHost:
		for _, f := range []struct {
			name string
			set  bool
		}{{"repoUrl", e.RepoURL != ""}, {"gitRef", e.GitRef != ""}, {"capability", e.Capability != ""}, {"ttlSeconds", e.TTLSeconds != nil}} {
			if f.set {
				return fmt.Errorf("%s applies to kind %q only", f.name, ExecutionSandbox)
			}
		}
	case ExecutionSandbox:
		if e.Jail != nil {
			return fmt.Errorf("jail applies to kind %q only; a sandbox is its own confinement", ExecutionHost)
		}
		if e.AcquireTimeoutMS != nil {
			return fmt.Errorf("acquireTimeoutMs applies to kind %q only", ExecutionHost)
		}
		if e.RepoURL != "" {
			u, err := url.Parse(e.RepoURL)
			if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				return errors.New("sandbox repoUrl must be an absolute HTTP(S) URL")
			}
			if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
				return errors.New("sandbox repoUrl must not contain credentials, query, or fragment")
			}
		}
		if e.TTLSeconds != nil && (*e.TTLSeconds < 1 || *e.TTLSeconds > 31_536_000) {
			return errors.New("ttlSeconds must be an integer from 1 to 31536000")
		}
	case "":
		return errors.New("kind is required (host or sandbox)")
	default:
		return fmt.Errorf("kind %q is not one of host, sandbox", e.Kind)
	}
	if j := e.Jail; j != nil {
		switch j.Mode {
		case "", JailOff, JailWrite, JailFS:
		default:
			return fmt.Errorf("jail.mode %q is not one of off, write-jail, fs-jail", j.Mode)
		}
		if strings.ContainsRune(j.Root, 0) || len(j.Root) > 4096 {
			return errors.New("jail.root is not a usable path")
		}
	}
	if n := e.NetJail; n != nil {
		switch n.Mode {
		case "", NetJailOff, NetJailOn:
		default:
			return fmt.Errorf("netJail.mode %q is not one of off, net-jail", n.Mode)
		}
		if _, err := CanonicalAllow(n.Allow); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name string
		v    *int64
	}{{"timeoutMs", e.TimeoutMS}, {"acquireTimeoutMs", e.AcquireTimeoutMS}} {
		if f.v != nil && (*f.v < 1 || *f.v > MaxExecutionTimeoutMS) {
			return fmt.Errorf("%s must be an integer from 1 to %d", f.name, MaxExecutionTimeoutMS)
		}
	}
	return nil
}

// CanonicalAllow returns a network jail allow list in its canonical form:
// lowercase host:port entries (a bare host is port 443), sorted, without
// duplicates. Two lists name the same endpoints exactly when their
// canonical forms are equal.
func CanonicalAllow(allow []string) ([]string, error) {
	seen := map[string]bool{}
	out := []string{}
	for _, raw := range allow {
		entry, err := canonicalAllowEntry(raw)
		if err != nil {
			return nil, err
		}
		if !seen[entry] {
			seen[entry] = true
			out = append(out, entry)
		}
	}
	slices.Sort(out)
	return out, nil
}

func canonicalAllowEntry(raw string) (string, error) {
	token := strings.TrimSpace(raw)
	host, portText := token, "443"
	if i := strings.LastIndexByte(token, ':'); i > 0 {
		host, portText = token[:i], token[i+1:]
	}
	host = strings.ToLower(host)
	if !validAllowHost(host) {
		return "", fmt.Errorf("netJail.allow entry %q: want a DNS name or IP address of letters, digits, dots and hyphens, with an optional :port", raw)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 {
		return "", fmt.Errorf("netJail.allow entry %q: port must be 1-65535", raw)
	}
	return host + ":" + strconv.Itoa(port), nil
}

// validAllowHost is the TypeScript bridge's host pattern:
// ^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$.
func validAllowHost(h string) bool {
	if len(h) == 0 || len(h) > 253 {
		return false
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !alnum(c) && ((c != '.' && c != '-') || i == 0 || i == len(h)-1) {
			return false
		}
	}
	return true
}
