package broker

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
)

// maxMetered bounds the body of an answer that is not a stream that the
// meter keeps to read its usage from.
const maxMetered = 8 << 20

// meter counts what each answer says it spent, as it passes.
func (b *Broker) meter(resp *http.Response) error {
	rt := resp.Request.Context().Value(routeKey{}).(route)
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	resp.Body = &meteredBody{rc: resp.Body, sse: mt == "text/event-stream", done: func(s spent) {
		b.mu.Lock()
		defer b.mu.Unlock()
		u := b.usage[rt.grant.Box]
		u.InputTokens += s.in
		u.OutputTokens += s.out
		if s.model != "" {
			if u.Models == nil {
				u.Models = map[string]int64{}
			}
			u.Models[s.model]++
		}
	}}
	return nil
}

// spent is what one answer said it spent.
type spent struct {
	in, out int64
	model   string
}

// usageFields are the token counts of the Anthropic and OpenAI APIs.
type usageFields struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
}

// usageDoc is the union of what the four API families say of usage and
// the served model, in an event or a whole answer. Every count is
// cumulative within an answer, so the last one seen wins.
type usageDoc struct {
	Model        string       `json:"model"`
	ModelVersion string       `json:"modelVersion"`
	Usage        *usageFields `json:"usage"`
	Message      *struct {
		Model string       `json:"model"`
		Usage *usageFields `json:"usage"`
	} `json:"message"`
	Response *struct {
		Model string       `json:"model"`
		Usage *usageFields `json:"usage"`
	} `json:"response"`
	UsageMetadata *struct {
		PromptTokenCount     int64 `json:"promptTokenCount"`
		CandidatesTokenCount int64 `json:"candidatesTokenCount"`
	} `json:"usageMetadata"`
}

func (s *spent) take(u *usageFields) {
	if u == nil {
		return
	}
	if n := max(u.InputTokens, u.PromptTokens); n > 0 {
		s.in = n
	}
	if n := max(u.OutputTokens, u.CompletionTokens); n > 0 {
		s.out = n
	}
}

// add reads one JSON document (an event's data, or a whole answer).
func (s *spent) add(doc []byte) {
	var d usageDoc
	if json.Unmarshal(doc, &d) != nil {
		return
	}
	for _, m := range []string{d.Model, d.ModelVersion} {
		if m != "" && s.model == "" {
			s.model = m
		}
	}
	s.take(d.Usage)
	if d.Message != nil {
		if s.model == "" {
			s.model = d.Message.Model
		}
		s.take(d.Message.Usage)
	}
	if d.Response != nil {
		if d.Response.Model != "" {
			s.model = d.Response.Model
		}
		s.take(d.Response.Usage)
	}
	if m := d.UsageMetadata; m != nil {
		s.take(&usageFields{InputTokens: m.PromptTokenCount, OutputTokens: m.CandidatesTokenCount})
	}
}

// meteredBody passes an answer through unchanged, reading its usage:
// each event of a stream whose data names usage or (until one is known)
// the model, or the whole of any other answer. done runs once, at the
// end or at Close.
type meteredBody struct {
	rc   io.ReadCloser
	sse  bool
	line []byte // a stream's unfinished line
	all  []byte // an answer that is not a stream
	over bool   // the answer outgrew maxMetered
	s    spent
	done func(spent)
	fin  bool
}

var (
	dataPrefix = []byte("data:")
	usageWord  = []byte(`"usage`)
	modelWord  = []byte(`"model`)
)

func (m *meteredBody) Read(p []byte) (int, error) {
	n, err := m.rc.Read(p)
	if n > 0 {
		m.scan(p[:n])
	}
	if err != nil {
		m.finish()
	}
	return n, err
}

func (m *meteredBody) scan(p []byte) {
	if !m.sse {
		if !m.over && len(m.all)+len(p) <= maxMetered {
			m.all = append(m.all, p...)
		} else {
			m.over, m.all = true, nil
		}
		return
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			m.line = append(m.line, p...)
			return
		}
		line := p[:i]
		if len(m.line) > 0 {
			m.line = append(m.line, line...)
			line = m.line
		}
		m.event(line)
		m.line = m.line[:0]
		p = p[i+1:]
	}
}

// event reads one line of a stream.
func (m *meteredBody) event(line []byte) {
	data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), dataPrefix)
	if !ok {
		return
	}
	if bytes.Contains(data, usageWord) || (m.s.model == "" && bytes.Contains(data, modelWord)) {
		m.s.add(bytes.TrimSpace(data))
	}
}

func (m *meteredBody) finish() {
	if m.fin {
		return
	}
	m.fin = true
	if !m.sse && !m.over && len(m.all) > 0 {
		doc := bytes.TrimSpace(m.all)
		if len(doc) > 0 && doc[0] == '[' { // Gemini's stream without alt=sse
			var parts []json.RawMessage
			if json.Unmarshal(doc, &parts) == nil {
				for _, p := range parts {
					m.s.add(p)
				}
			}
		} else {
			m.s.add(doc)
		}
	}
	m.done(m.s)
}

func (m *meteredBody) Close() error {
	m.finish()
	return m.rc.Close()
}
