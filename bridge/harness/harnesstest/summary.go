package harnesstest

import (
	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// Summary is what a client sees of a turn's events, whatever the delta
// boundaries.
type Summary struct {
	Session, Text, Reasoning string
	TextDeltas               int
	ToolCalls                []wire.ToolCall
	ToolResults              []wire.ToolResult
	ProviderModels           []string
	Ends                     []harness.Event
}

// Summarize sums up a parser's events.
func Summarize(evs []harness.Event) Summary {
	var s Summary
	for _, ev := range evs {
		switch ev.Kind {
		case harness.KindSession:
			s.Session = ev.NativeSessionID
		case harness.KindText:
			s.Text += ev.Text
			s.TextDeltas++
		case harness.KindReasoning:
			s.Reasoning += ev.Text
		case harness.KindToolCall:
			s.ToolCalls = append(s.ToolCalls, *ev.ToolCall)
		case harness.KindToolResult:
			s.ToolResults = append(s.ToolResults, *ev.ToolResult)
		case harness.KindProviderModel:
			s.ProviderModels = append(s.ProviderModels, ev.ProviderModel)
		case harness.KindEnd:
			s.Ends = append(s.Ends, ev)
		}
	}
	return s
}
