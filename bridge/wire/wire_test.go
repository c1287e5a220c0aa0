package wire

import (
	"strings"
	"testing"
)

func TestValidRunID(t *testing.T) {
	tests := []struct {
		id string
		ok bool
	}{
		{"a", true},
		{"run-1.2_3:x", true},
		{"0abc", true},
		{strings.Repeat("a", 128), true},
		{strings.Repeat("a", 129), false},
		{"", false},
		{"-a", false},
		{".a", false},
		{"a b", false},
		{"a/b", false},
		{"é", false},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			if err := ValidRunID(tt.id); (err == nil) != tt.ok {
				t.Errorf("ValidRunID(%q) = %v, want ok %v", tt.id, err, tt.ok)
			}
		})
	}
}

func TestParseCursor(t *testing.T) {
	tests := []struct {
		name, std, alias string
		want             int64
		wantErr          bool
	}{
		{"absent", "", "", 0, false},
		{"zero", "0", "", 0, false},
		{"standard", "7", "", 7, false},
		{"alias", "", "9", 9, false},
		{"agree", "5", "5", 5, false},
		{"disagree", "5", "6", 0, true},
		{"negative", "-1", "", 0, true},
		{"leading zero", "07", "", 0, true},
		{"plus", "+7", "", 0, true},
		{"junk", "x", "", 0, true},
		{"bad alias", "3", "y", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCursor(tt.std, tt.alias)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("ParseCursor(%q, %q) = %d, %v, want %d, err %v", tt.std, tt.alias, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestRequestDigest(t *testing.T) {
	a := map[string]any{"model": "claude-code/sonnet", "messages": []any{map[string]any{"role": "user", "content": "hi"}}, "max_tokens": 1.0, "stream": true}
	b := map[string]any{"max_tokens": 1, "messages": []any{map[string]any{"content": "hi", "role": "user"}}, "model": "claude-code/sonnet"}
	c := map[string]any{"model": "claude-code/sonnet", "messages": []any{map[string]any{"role": "user", "content": "bye"}}}
	da, err := RequestDigest("claude-code", a)
	if err != nil {
		t.Fatal(err)
	}
	db, _ := RequestDigest("claude-code", b)
	dc, _ := RequestDigest("claude-code", c)
	dh, _ := RequestDigest("codex", b)
	if da != db {
		t.Errorf("digest differs by key order, number spelling or stream: %s vs %s", da, db)
	}
	if da == dc || da == dh {
		t.Errorf("digest did not change with content or harness")
	}
	if !strings.HasPrefix(da, "sha256:") || len(da) != len("sha256:")+64 {
		t.Errorf("RequestDigest = %q, want sha256:<64 hex>", da)
	}
}

// TestRequestDigest_RunID holds the digest to the TypeScript bridge's
// durable-run digest, which leaves the run id out: the same job under two
// run ids has one digest, and what the job is still changes it.
func TestRequestDigest_RunID(t *testing.T) {
	job := func(extra map[string]any) map[string]any {
		m := map[string]any{"model": "claude-code/sonnet", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	base, err := RequestDigest("claude-code", job(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		body  map[string]any
		equal bool
	}{
		{"run id r1", job(map[string]any{"run_id": "r1"}), true},
		{"run id r2", job(map[string]any{"run_id": "r2"}), true},
		{"run id and stream", job(map[string]any{"run_id": "r3", "stream": true}), true},
		{"session id", job(map[string]any{"run_id": "r1", "session_id": "s1"}), false},
		{"execution id", job(map[string]any{"run_id": "r1", "provider": "p", "environment_id": "e", "execution_id": "x"}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RequestDigest("claude-code", tc.body)
			if err != nil || (got == base) != tc.equal {
				t.Errorf("RequestDigest(%v) = %s, %v; equal to the job's own digest %s: %v, want %v", tc.body, got, err, base, got == base, tc.equal)
			}
		})
	}
}

func TestStatusFor(t *testing.T) {
	for typ, want := range map[string]int{
		TypeInvalidReplayCursor: 409, TypeExpiredReplayCursor: 410, TypeExecutorSaturated: 429,
		TypeInvalidAuthentication: 401, TypeRequestTooLarge: 413, "nope": 500,
	} {
		if got := StatusFor(typ); got != want {
			t.Errorf("StatusFor(%q) = %d, want %d", typ, got, want)
		}
	}
}
