package provider

import (
	"context"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

var (
	recorderOnce sync.Once
	recorder     *tracetest.SpanRecorder
	recorderTP   *sdktrace.TracerProvider
)

// spanRecorder records this test binary's spans: the package's tracer
// binds to the first global provider, so one is installed once.
func spanRecorder() (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	recorderOnce.Do(func() {
		recorder = tracetest.NewSpanRecorder()
		recorderTP = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
		otel.SetTracerProvider(recorderTP)
	})
	return recorder, recorderTP
}

func TestStream_turnSpan(t *testing.T) {
	rec, tp := spanRecorder()
	tests := []struct {
		name       string
		transcript string
		cancel     bool
		outcome    string
	}{
		{"completed", "canonical_ok.sse", false, StatusCompleted},
		{"caller cancelled", "", true, StatusCancelled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, "")
			if tc.transcript != "" {
				f.transcript = loadTranscript(t, tc.transcript)
			} else {
				hang(f, "POST /v1/chat/completions")
			}
			env := newEnv(t, f)
			ctx, parent := tp.Tracer("test").Start(t.Context(), "caller")
			var cancel context.CancelFunc = func() {}
			if tc.cancel {
				ctx, cancel = context.WithCancel(ctx)
				go func() { <-f.started; cancel() }()
			}
			defer cancel()
			_, _ = drain(env.Stream(ctx, Turn{Prompt: "hi"}))
			parent.End()
			var turn sdktrace.ReadOnlySpan
			for _, s := range rec.Ended() {
				if s.Name() == "turn" && s.Parent().SpanID() == parent.SpanContext().SpanID() {
					turn = s
				}
			}
			if turn == nil {
				t.Fatal("no turn span under the caller's span")
			}
			attrs := map[attribute.Key]attribute.Value{}
			for _, kv := range turn.Attributes() {
				attrs[kv.Key] = kv.Value
			}
			if got := attrs[AttrOutcome].AsString(); got != tc.outcome {
				t.Errorf("outcome = %q, want %q", got, tc.outcome)
			}
			if _, ok := attrs[AttrFirstEvent]; !ok && !tc.cancel {
				t.Error("no time to the first event")
			}
			// Every request of the turn carried the turn span's context.
			f.mu.Lock()
			defer f.mu.Unlock()
			want := "-" + turn.SpanContext().SpanID().String() + "-"
			n := 0
			for i, tp := range f.traceparents {
				if strings.Contains(f.requests[i], "/v1/chat/completions") {
					n++
					if !strings.Contains(tp, turn.SpanContext().TraceID().String()) || !strings.Contains(tp, want) {
						t.Errorf("%s carried traceparent %q, want the turn span's %s", f.requests[i], tp, turn.SpanContext().SpanID())
					}
				}
			}
			if n == 0 {
				t.Errorf("no turn request among %v", f.requests)
			}
		})
	}
}
