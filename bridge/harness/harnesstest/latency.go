package harnesstest

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/routerstub"
)

// LatencyReplies are the model replies of a latency run of n turns:
// "answer 1" ... "answer n".
func LatencyReplies(n int) []routerstub.Reply {
	out := make([]routerstub.Reply, n)
	for i := range out {
		out[i] = routerstub.Text("answer " + strconv.Itoa(i+1))
	}
	return out
}

// TurnLatency runs turns 1..n of one session with turn (which admits the
// turn and waits for its terminal status) and returns the median time of
// turns 2..n, from admission to terminal. Each turn must complete with
// the LatencyReplies answer of its number.
func TurnLatency(t *testing.T, n int, turn func(n int, prompt string) (status, text string)) time.Duration {
	t.Helper()
	var took []time.Duration
	for i := 1; i <= n; i++ {
		start := time.Now()
		status, text := turn(i, "turn "+strconv.Itoa(i))
		if status != "completed" || !strings.Contains(text, "answer "+strconv.Itoa(i)) {
			t.Fatalf("turn %d = %s %q", i, status, text)
		}
		if i > 1 {
			took = append(took, time.Since(start))
		}
	}
	slices.Sort(took)
	t.Logf("turns 2..%d: %v", n, took)
	return took[len(took)/2]
}
