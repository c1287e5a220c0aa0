package engine

import (
	"encoding/json"
	"fmt"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// chunker turns harness events into stored frames (the data of one SSE
// frame each) for one run.
type chunker struct {
	id, model string
	created   int64
	roleSent  bool
	// providerModels are the models the model API said served the turn,
	// in first-seen order.
	providerModels []string
	// prefix caches the encoded start of a delta chunk, per delta key.
	prefix map[string][]byte
}

// deltaSuffix ends a one-field delta chunk.
const deltaSuffix = `},"finish_reason":null}]}`

// deltaFrame encodes a chunk whose delta is the one string field key
// (content or reasoning) without reflection: such chunks are nearly all of
// a turn's frames. The bytes equal those of mustJSON(c.chunk(...)); a test
// holds the two together.
func (c *chunker) deltaFrame(key, text string) []byte {
	p := c.prefix[key]
	if p == nil {
		if c.prefix == nil {
			c.prefix = map[string][]byte{}
		}
		p = fmt.Appendf(nil, `{"id":%s,"object":%s,"created":%d,"model":%s,"choices":[{"index":0,"delta":{%s:`,
			mustJSON(c.id), mustJSON(wire.ChunkObject), c.created, mustJSON(c.model), mustJSON(key))
		c.prefix[key] = p
	}
	t := mustJSON(text)
	out := make([]byte, 0, len(p)+len(t)+len(deltaSuffix))
	return append(append(append(out, p...), t...), deltaSuffix...)
}

func (c *chunker) chunk(d wire.Delta, finish *string) wire.Chunk {
	if !c.roleSent {
		d.Role, c.roleSent = "assistant", true
	}
	return wire.Chunk{ID: c.id, Object: wire.ChunkObject, Created: c.created, Model: c.model,
		Choices: []wire.ChunkChoice{{Index: 0, Delta: d, FinishReason: finish}}}
}

// frames converts one event; End events are handled by end.
func (c *chunker) frames(ev harness.Event) [][]byte {
	var ch wire.Chunk
	switch {
	case ev.Kind == harness.KindText && c.roleSent && ev.Text != "":
		return [][]byte{c.deltaFrame("content", ev.Text)}
	case ev.Kind == harness.KindReasoning && c.roleSent && ev.Text != "":
		return [][]byte{c.deltaFrame("reasoning", ev.Text)}
	}
	switch ev.Kind {
	case harness.KindText:
		ch = c.chunk(wire.Delta{Content: ev.Text}, nil)
	case harness.KindReasoning:
		ch = c.chunk(wire.Delta{Reasoning: ev.Text}, nil)
	case harness.KindToolCall:
		ch = c.chunk(wire.Delta{ToolCalls: []wire.ToolCall{*ev.ToolCall}}, nil)
	case harness.KindToolResult:
		ch = c.chunk(wire.Delta{ToolResults: []wire.ToolResult{*ev.ToolResult}}, nil)
	case harness.KindProviderModel:
		for _, m := range c.providerModels {
			if m == ev.ProviderModel {
				return nil
			}
		}
		c.providerModels = append(c.providerModels, ev.ProviderModel)
		return nil
	default:
		return nil
	}
	return [][]byte{mustJSON(ch)}
}

// end returns the terminal frames of a turn that ended with ev.
func (c *chunker) end(ev harness.Event) [][]byte {
	if ev.Err != nil {
		var out [][]byte
		if ev.Usage != nil || len(c.providerModels) > 0 {
			out = append(out, mustJSON(wire.Chunk{ID: c.id, Object: wire.ChunkObject, Created: c.created,
				Model: c.model, Choices: []wire.ChunkChoice{}, Usage: ev.Usage.TurnTotal(), ProviderModels: c.providerModels}))
		}
		return append(out, errorFrame(*ev.Err))
	}
	finish := ev.Finish
	if finish == "" {
		finish = wire.FinishStop
	}
	ch := c.chunk(wire.Delta{}, &finish)
	ch.Usage, ch.ProviderModels = ev.Usage.TurnTotal(), c.providerModels
	return [][]byte{mustJSON(ch)}
}

func errorFrame(e wire.ErrorBody) []byte {
	return mustJSON(wire.ErrorResponse{Error: e})
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("engine: encode frame: " + err.Error()) // only our own wire types are encoded
	}
	return b
}
