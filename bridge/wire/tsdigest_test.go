package wire

import (
	"encoding/json"
	"os"
	"testing"
)

// TestDigest_MatchesAgentInterface holds every digest both sides compute
// to the values the TypeScript agent interface computes for the same
// documents: testdata/ts-digests.json was written by a Node 22 script
// over @tangle-network/agent-interface 1.6.0
// (agentRunCancellationRequestDigest, interactionResponseCommandDigest,
// nativeContextContinuationTurnDigest,
// nativeContextContinuationRequestDigest, canonicalCandidateDigest),
// with non-ASCII keys and values, numbers such as 1e21, 1e-7 and 0.1, and
// keys that UTF-16 and UTF-8 order differently.
func TestDigest_MatchesAgentInterface(t *testing.T) {
	raw, err := os.ReadFile("testdata/ts-digests.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Canonical string `json:"canonical"`
		Cases     []struct {
			Name, Kind, Digest string
			Input              json.RawMessage
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Cases) < 10 {
		t.Fatalf("%d cases, want the whole set", len(file.Cases))
	}
	for _, c := range file.Cases {
		t.Run(c.Name, func(t *testing.T) {
			var got string
			var err error
			switch c.Kind {
			case "cancellation":
				var r CancellationRequest
				if err := json.Unmarshal(c.Input, &r); err != nil {
					t.Fatal(err)
				}
				got, err = CancellationDigest(r)
			case "interactionCommand":
				var m struct {
					Binding  InteractionBinding  `json:"binding"`
					Response InteractionResponse `json:"response"`
				}
				if err := json.Unmarshal(c.Input, &m); err != nil {
					t.Fatal(err)
				}
				got, err = InteractionCommandDigest(m.Binding, m.Response)
			case "continuationTurn":
				var turn ContinuationTurn
				if err := json.Unmarshal(c.Input, &turn); err != nil {
					t.Fatal(err)
				}
				got, err = ContinuationTurnDigest(turn)
			case "continuationRequest":
				var r ContinuationRequest
				if err := json.Unmarshal(c.Input, &r); err != nil {
					t.Fatal(err)
				}
				got, err = ContinuationRequestDigest(r)
			case "canonical":
				var b []byte
				if b, err = Canonical(c.Input); err == nil && string(b) != file.Canonical {
					t.Errorf("Canonical = %s\nwant        %s", b, file.Canonical)
				}
				got, err = Digest(c.Input)
			default:
				t.Fatalf("unknown kind %q", c.Kind)
			}
			if err != nil || got != c.Digest {
				t.Errorf("%s digest = %s, %v, want %s (the agent interface's)", c.Kind, got, err, c.Digest)
			}
		})
	}
}
