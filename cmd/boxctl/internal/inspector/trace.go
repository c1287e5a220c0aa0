package inspector

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/tangle-network/boxctl/provider"
)

// Trace is the answer of GET /api/boxes/{box}/runs/{run}/trace: the
// spans of the turn's trace, read from Jaeger, oldest first.
type Trace struct {
	// Tracing reports whether the server reads traces (Options.JaegerURL).
	Tracing bool   `json:"tracing"`
	TraceID string `json:"traceId,omitempty"`
	// URL is the trace's page in Jaeger's UI.
	URL   string `json:"url,omitempty"`
	Spans []Span `json:"spans"`
}

// Span is one span of a Trace; StartMS counts from the trace's first span.
type Span struct {
	Name       string  `json:"name"`
	Service    string  `json:"service"`
	StartMS    float64 `json:"startMs"`
	DurationMS float64 `json:"durationMs"`
	// Depth is the span's distance from the trace's root.
	Depth int  `json:"depth"`
	Error bool `json:"error,omitempty"`
}

// jaegerTraces is the part of Jaeger's /api/traces answers the view reads.
type jaegerTraces struct {
	Data []struct {
		TraceID string `json:"traceID"`
		Spans   []struct {
			SpanID        string `json:"spanID"`
			OperationName string `json:"operationName"`
			References    []struct {
				RefType string `json:"refType"`
				SpanID  string `json:"spanID"`
			} `json:"references"`
			StartTime int64  `json:"startTime"` // µs
			Duration  int64  `json:"duration"`  // µs
			ProcessID string `json:"processID"`
			Tags      []struct {
				Key   string `json:"key"`
				Value any    `json:"value"`
			} `json:"tags"`
		} `json:"spans"`
		Processes map[string]struct {
			ServiceName string `json:"serviceName"`
		} `json:"processes"`
	} `json:"data"`
}

func (s *Server) trace(w http.ResponseWriter, r *http.Request) {
	run := r.PathValue("run")
	if err := checkRunID(run); err != nil {
		writeError(w, err)
		return
	}
	if _, err := s.record(r.PathValue("box")); err != nil {
		writeError(w, err)
		return
	}
	out := Trace{Tracing: s.o.JaegerURL != "", Spans: []Span{}}
	if !out.Tracing {
		writeJSON(w, http.StatusOK, out)
		return
	}
	s.mu.Lock()
	if t := s.turns[run]; t != nil {
		out.TraceID = t.traceID
	}
	s.mu.Unlock()
	var (
		jt  jaegerTraces
		err error
	)
	if out.TraceID != "" {
		err = s.jaeger(r.Context(), "/api/traces/"+url.PathEscape(out.TraceID), &jt)
	} else {
		tags, _ := json.Marshal(map[string]string{provider.AttrRunID: run})
		q := url.Values{"service": {s.o.JaegerService}, "tags": {string(tags)}, "limit": {"1"}}
		err = s.jaeger(r.Context(), "/api/traces?"+q.Encode(), &jt)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	if len(jt.Data) > 0 {
		out.TraceID = jt.Data[0].TraceID
		out.Spans = spansOf(jt)
		out.URL = strings.TrimSuffix(s.o.JaegerURL, "/") + "/trace/" + url.PathEscape(out.TraceID)
	}
	writeJSON(w, http.StatusOK, out)
}

// jaeger reads a query API answer into v. A trace Jaeger does not have
// yet is an empty answer.
func (s *Server) jaeger(ctx context.Context, path string, v *jaegerTraces) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(s.o.JaegerURL, "/")+path, nil)
	if err != nil {
		return err
	}
	resp, err := s.o.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("jaeger: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("jaeger: %s", resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(v); err != nil {
		return fmt.Errorf("jaeger: %w", err)
	}
	return nil
}

// spansOf flattens the first trace of jt: spans by start, each with its
// depth under its parent.
func spansOf(jt jaegerTraces) []Span {
	tr := jt.Data[0]
	parent := map[string]string{}
	var t0 int64
	for i, sp := range tr.Spans {
		for _, ref := range sp.References {
			if ref.RefType == "CHILD_OF" {
				parent[sp.SpanID] = ref.SpanID
			}
		}
		if i == 0 || sp.StartTime < t0 {
			t0 = sp.StartTime
		}
	}
	depth := func(id string) int {
		d := 0
		for p, ok := parent[id]; ok && d < 64; p, ok = parent[p] {
			d++
		}
		return d
	}
	out := make([]Span, 0, len(tr.Spans))
	for _, sp := range tr.Spans {
		failed := false
		for _, tag := range sp.Tags {
			if tag.Key == "error" && tag.Value == true || tag.Key == "otel.status_code" && tag.Value == "ERROR" {
				failed = true
			}
		}
		out = append(out, Span{Name: sp.OperationName, Service: tr.Processes[sp.ProcessID].ServiceName,
			StartMS: float64(sp.StartTime-t0) / 1000, DurationMS: float64(sp.Duration) / 1000, Depth: depth(sp.SpanID), Error: failed})
	}
	slices.SortStableFunc(out, func(a, b Span) int {
		switch {
		case a.StartMS < b.StartMS:
			return -1
		case a.StartMS > b.StartMS:
			return 1
		}
		return a.Depth - b.Depth
	})
	return out
}
