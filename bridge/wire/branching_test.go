package wire

import (
	"encoding/json"
	"testing"
)

// TestBranchingDigests_MatchAgentInterface holds the digests of the
// workspace and portable context documents to the values the TypeScript
// agent interface 1.6.0 computes for the same documents
// (workspaceCheckpointRequestDigest, workspaceForkRequestDigest,
// workspaceCleanupRequestDigest, portableConversationContextDigest,
// portableContextPlanRequestDigest, run under Node 22).
func TestBranchingDigests_MatchAgentInterface(t *testing.T) {
	ref := RunRef{RunID: "run-1", Provider: "cli-bridge", EnvironmentID: "env-1", SessionID: "ses-1", ExecutionID: "exec-1",
		RequestDigest: "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}
	ck := CheckpointRequest{Source: ref, Name: "ck", Metadata: json.RawMessage(`{"branchId":"b1","n":1.5}`)}
	ckDigest, _ := Digest(ck.Material())
	fk := ForkRequest{Checkpoint: CheckpointRef{CheckpointID: "ckpt_1", Provider: "cli-bridge", Source: ref, IdempotencyKey: "k1",
		RequestDigest: ckDigest, CreatedAt: "2026-01-02T03:04:05.000Z", Metadata: json.RawMessage(`{"branchId":"b1","n":1.5}`)},
		Name: "fk", Metadata: json.RawMessage(`{"branchId":"b2"}`), Placement: Placement{Kind: "local"}}
	ctx := PortableContext{Source: ContextSource{RunID: "r", MessageID: "m1", Provider: "p", EnvironmentID: "e", SessionID: "s",
		ExecutionID: "x", RequestDigest: "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}, Completeness: "complete",
		Messages: []ContextMessage{{ID: "m1", Role: "user", Timestamp: "2026-01-02T03:04:05.000Z",
			Parts: []json.RawMessage{json.RawMessage(`{"type":"text","text":"héllo \u2028 <b>"}`)}}}, Attachments: []ContextAttachment{}}
	ctx.Digest, _ = Digest(ctx.Material())
	max := int64(100)
	plan := ContextPlanRequest{RequestID: "req-1", Source: ctx, MaxInputTokens: &max, Destination: ContextDestination{Runner: "pi",
		Provider: "cli-bridge", EnvironmentID: "e2", SessionID: "s2", RunID: "r2", ExecutionID: "x2", Model: "router/m",
		ProfileDigest: "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"}}
	for _, tt := range []struct {
		name     string
		material any
		want     string
	}{
		{"checkpoint request", ck.Material(), "sha256:d00f7871644d4126c83077f01d928ac9b7ab05dc717609c6748343f6ada256e2"},
		{"fork request", fk.Material(), "sha256:aaab768a549ec2913c4f1415ea1d92d3fa57cc54dc3cbc8882001bc83f8df449"},
		{"cleanup request", CleanupRequest{Kind: "fork", TargetID: "fork_1", Provider: "cli-bridge"}.Material(),
			"sha256:e35ddbb74e2e67e05875ff65383a88ea7c88a8ca4a0fe1c00c928ecceda1bbc6"},
		{"portable context", ctx.Material(), "sha256:e772b41b39513c0621903556a4730ca4a527e3d299940ad09dab3f8f71de914d"},
		{"context plan request", plan.Material(), "sha256:bb8446b45ebce6e7830f5ba1c1ed9a98d89fd103e58b6f432dbda866cda53929"},
	} {
		if got, err := Digest(tt.material); err != nil || got != tt.want {
			t.Errorf("%s digest = %s, %v; the agent interface computes %s", tt.name, got, err, tt.want)
		}
	}
}
