package claude

import "testing"

// BenchmarkParser_TextDelta parses the line that makes up most of a turn.
func BenchmarkParser_TextDelta(b *testing.B) {
	line := []byte(`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello, world. "}},"session_id":"5d3c8f0e-2f4b-4b7e-9a51-0c2f7f0e1a2b","parent_tool_use_id":null,"uuid":"0b9d2c1e-7a8f-4c3d-9e6b-1f2a3b4c5d6e"}`)
	p := newParser()
	b.ReportAllocs()
	for b.Loop() {
		if evs := p.Line(line); len(evs) != 1 {
			b.Fatalf("events = %d", len(evs))
		}
	}
}
