package engine

import (
	"fmt"
	"unicode/utf8"

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
	// arena holds the delta frames, each in bytes never written again,
	// so that encoding one allocates nothing of its own.
	arena []byte
}

// deltaSuffix ends a one-field delta chunk.
const deltaSuffix = `},"finish_reason":null}]}`

// frameChunk is the size of the chunks of chunker.arena.
const frameChunk = 32 << 10

// deltaFrame encodes a chunk whose delta is the one string field key
// (content or reasoning) without reflection: such chunks are nearly all of
// a turn's frames. The bytes equal those of wire.MustJSON(c.chunk(...)); a test
// holds the two together.
func (c *chunker) deltaFrame(key, text string) []byte {
	p := c.prefix[key]
	if p == nil {
		if c.prefix == nil {
			c.prefix = map[string][]byte{}
		}
		p = fmt.Appendf(nil, `{"id":%s,"object":%s,"created":%d,"model":%s,"choices":[{"index":0,"delta":{%s:`,
			wire.MustJSON(c.id), wire.MustJSON(wire.ChunkObject), c.created, wire.MustJSON(c.model), wire.MustJSON(key))
		c.prefix[key] = p
	}
	// The longest encoding of text: every byte escaped as \u00XX.
	if need := len(p) + 6*len(text) + 2 + len(deltaSuffix); cap(c.arena)-len(c.arena) < need {
		c.arena = make([]byte, 0, max(frameChunk, need))
	}
	start := len(c.arena)
	c.arena = append(appendJSONString(append(c.arena, p...), text), deltaSuffix...)
	return c.arena[start:len(c.arena):len(c.arena)]
}

// appendJSONString appends s as a JSON string exactly as encoding/json
// writes it: HTML-significant characters, U+2028 and U+2029 escaped,
// invalid UTF-8 as U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	done := 0 // s[:done] is in dst
	for i := 0; i < len(s); {
		b := s[i]
		if b >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			var esc string
			switch {
			case r == utf8.RuneError && n == 1:
				esc = `\ufffd`
			case r == '\u2028':
				esc = `\u2028`
			case r == '\u2029':
				esc = `\u2029`
			}
			if esc != "" {
				dst = append(append(dst, s[done:i]...), esc...)
				done = i + n
			}
			i += n
			continue
		}
		if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
			i++
			continue
		}
		dst = append(dst, s[done:i]...)
		switch b {
		case '"', '\\':
			dst = append(dst, '\\', b)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xf])
		}
		i++
		done = i
	}
	return append(append(dst, s[done:]...), '"')
}

func (c *chunker) chunk(d wire.Delta, finish *string) wire.Chunk {
	if !c.roleSent {
		d.Role, c.roleSent = "assistant", true
	}
	return wire.Chunk{ID: c.id, Object: wire.ChunkObject, Created: c.created, Model: c.model,
		Choices: []wire.ChunkChoice{{Index: 0, Delta: d, FinishReason: finish}}}
}

// appendFrames appends the frames of one event to dst; End events are
// handled by end.
func (c *chunker) appendFrames(dst [][]byte, ev harness.Event) [][]byte {
	var ch wire.Chunk
	switch {
	case ev.Kind == harness.KindText && c.roleSent && ev.Text != "":
		return append(dst, c.deltaFrame("content", ev.Text))
	case ev.Kind == harness.KindReasoning && c.roleSent && ev.Text != "":
		return append(dst, c.deltaFrame("reasoning", ev.Text))
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
				return dst
			}
		}
		c.providerModels = append(c.providerModels, ev.ProviderModel)
		return dst
	default:
		return dst
	}
	return append(dst, wire.MustJSON(ch))
}

// end returns the terminal frames of a turn that ended with ev.
func (c *chunker) end(ev harness.Event) [][]byte {
	if ev.Err != nil {
		var out [][]byte
		if ev.Usage != nil || len(c.providerModels) > 0 {
			out = append(out, wire.MustJSON(wire.Chunk{ID: c.id, Object: wire.ChunkObject, Created: c.created,
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
	return [][]byte{wire.MustJSON(ch)}
}

func errorFrame(e wire.ErrorBody) []byte {
	return wire.MustJSON(wire.ErrorResponse{Error: e})
}
