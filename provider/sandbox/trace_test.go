package sandbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/sandboxtest"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
)

var (
	tracerOnce sync.Once
	testTP     *sdktrace.TracerProvider
	tracerErr  error
)

// exportTo makes this test process export its spans (the caller's, the
// sandbox provider's, the provider client's) to the test bed's OTLP
// receiver, once for the whole test binary: the packages' tracers bind to
// the first global provider.
func exportTo(t *testing.T, endpoint string) *sdktrace.TracerProvider {
	t.Helper()
	tracerOnce.Do(func() {
		exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(endpoint+"/v1/traces"))
		if err != nil {
			tracerErr = err
			return
		}
		res := resource.NewSchemaless(attribute.String("service.name", "sandbox-test"))
		testTP = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(100*time.Millisecond)), sdktrace.WithResource(res))
		otel.SetTracerProvider(testTP)
	})
	if tracerErr != nil {
		t.Fatal(tracerErr)
	}
	return testTP
}

// forwardTo accepts connections on the boxes' network and relays them to
// addr (a loopback service), so that a box reaches it; it returns the
// listener's http URL.
func forwardTo(t *testing.T, host, addr string) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", addr)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, c) }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
	return "http://" + l.Addr().String()
}

// jaegerSpan is a span as Jaeger's query API returns it.
type jaegerSpan struct {
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	ProcessID string `json:"processID"`
	Tags      []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
}

func (s jaegerSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

func (s jaegerSpan) tag(key string) string {
	for _, kv := range s.Tags {
		if kv.Key == key {
			return fmt.Sprint(kv.Value)
		}
	}
	return ""
}

// jaegerTrace is one trace read back: its spans, and each span's service.
type jaegerTrace struct {
	spans   []jaegerSpan
	service map[string]string // span id -> service name
	raw     []byte            // the query API's answer
}

// named returns the spans called name.
func (tr jaegerTrace) named(name string) []jaegerSpan {
	var out []jaegerSpan
	for _, s := range tr.spans {
		if s.OperationName == name {
			out = append(out, s)
		}
	}
	return out
}

// readTrace polls the query API until trace id holds a span of every
// name in want, and returns it.
func readTrace(t *testing.T, base string, id trace.TraceID, want []string) jaegerTrace {
	t.Helper()
	var tr jaegerTrace
	polltest.UntilNil(t, 90*time.Second, fmt.Sprintf("trace %s from %s", id, base), func() error {
		got, err := getTrace(t.Context(), base, id.String())
		if err != nil {
			return err
		}
		if missing := slices.DeleteFunc(slices.Clone(want), func(n string) bool { return len(got.named(n)) > 0 }); len(missing) > 0 {
			return fmt.Errorf("lacks %v", missing)
		}
		// The bridge exports in batches: a span can arrive before its
		// parent does. The trace is read once every parent is in it.
		ids := map[string]bool{}
		for _, s := range got.spans {
			ids[s.SpanID] = true
		}
		for _, s := range got.spans {
			if p := s.parent(); p != "" && !ids[p] {
				return fmt.Errorf("span %s (%s) waits for its parent %s", s.OperationName, s.SpanID, p)
			}
		}
		tr = got
		return nil
	})
	return tr
}

func getTrace(ctx context.Context, base, id string) (jaegerTrace, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/traces/"+url.PathEscape(id), nil)
	if err != nil {
		return jaegerTrace{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return jaegerTrace{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return jaegerTrace{}, fmt.Errorf("GET /api/traces/%s: %s", id, resp.Status)
	}
	var body struct {
		Data []struct {
			Spans     []jaegerSpan `json:"spans"`
			Processes map[string]struct {
				ServiceName string `json:"serviceName"`
			} `json:"processes"`
		} `json:"data"`
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return jaegerTrace{}, err
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return jaegerTrace{}, err
	}
	if len(body.Data) != 1 {
		return jaegerTrace{}, fmt.Errorf("GET /api/traces/%s: %d traces", id, len(body.Data))
	}
	tr := jaegerTrace{spans: body.Data[0].Spans, service: map[string]string{}, raw: raw}
	for _, s := range tr.spans {
		tr.service[s.SpanID] = body.Data[0].Processes[s.ProcessID].ServiceName
	}
	return tr, nil
}

// childOf fails t unless every span called child in tr has a parent
// called parent.
func childOf(t *testing.T, tr jaegerTrace, child, parent string) {
	t.Helper()
	names := map[string]string{}
	for _, s := range tr.spans {
		names[s.SpanID] = s.OperationName
	}
	for _, s := range tr.named(child) {
		if got := names[s.parent()]; got != parent {
			t.Errorf("span %s (%s) is a child of %q, want %q", child, tr.service[s.SpanID], got, parent)
		}
	}
}

// The phases every Docker create without a workspace goes through (no
// status: the box's handle knows its deadline).
var createPhases = []string{sandbox.PhaseChecks, sandbox.PhaseVendor, sandbox.PhaseSpawn, sandbox.PhaseEndpoint,
	sandbox.PhaseHealth, sandbox.PhasePins, sandbox.PhaseAttach}

func TestProvider_LiveTrace(t *testing.T) {
	t.Parallel()
	tb := testbed.RequireTracing(t)
	f := setup(t)
	tp := exportTo(t, tb.OTLPEndpoint)
	host, err := f.Vendor.HostAddress(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	otlp, err := url.Parse(tb.OTLPEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		events []sandbox.Event
	)
	p := f.Provider(t, func(o *sandbox.Options) {
		o.BridgeEnv = map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": forwardTo(t, host, otlp.Host), "OTEL_BSP_SCHEDULE_DELAY": "100"}
		o.OnEvent = func(ev sandbox.Event) { mu.Lock(); events = append(events, ev); mu.Unlock() }
	})
	caller := tp.Tracer("sandbox-test")

	ctx, root := caller.Start(t.Context(), "test.create")
	env, err := p.Create(ctx, sandbox.CreateRequest{Profile: claude})
	root.End()
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	destroyed := false
	t.Cleanup(func() {
		if !destroyed {
			_ = env.Destroy(context.WithoutCancel(t.Context()))
		}
	})
	var got []string
	for _, ph := range env.Timings() {
		got = append(got, ph.Name)
		t.Logf("phase %-14s %10.1fms", ph.Name, float64(ph.Duration)/float64(time.Millisecond))
	}
	t.Logf("phase %-14s %10.1fms", "total", float64(sandbox.Total(env.Timings()))/float64(time.Millisecond))
	if !slices.Equal(got, createPhases) {
		t.Errorf("Timings = %v, want %v", got, createPhases)
	}

	var turns []trace.TraceID
	for i := range 2 {
		ctx, span := caller.Start(t.Context(), "test.turn")
		text, _, err := sandboxtest.Turn(ctx, env, provider.Turn{Prompt: fmt.Sprintf("Say hello, %d.", i)})
		span.End()
		if err != nil || !strings.Contains(text, replyText) {
			t.Fatalf("turn %d = %q, %v; want %q", i, text, err, replyText)
		}
		turns = append(turns, span.SpanContext().TraceID())
	}
	// The traces are read while the box lives: the bridge exports its
	// spans in batches, and a destroyed box sends nothing more.
	if err := tp.ForceFlush(t.Context()); err != nil {
		t.Fatal(err)
	}

	// The create: one trace, its phases children of sandbox.create.
	want := append([]string{"test.create", "sandbox.create"}, prefixed("create.", createPhases)...)
	tr := readTrace(t, tb.JaegerURL, root.SpanContext().TraceID(), want)
	childOf(t, tr, "sandbox.create", "test.create")
	for _, ph := range createPhases {
		childOf(t, tr, "create."+ph, "sandbox.create")
	}
	t.Logf("create trace %s: %d spans", root.SpanContext().TraceID(), len(tr.spans))
	// No secret in any span, the box's and the caller's: not the model
	// key, not the bridge's bearer.
	secrets := map[string]string{"the model key": f.Router.Key, "the bearer": env.Reference().Bearer}
	noSecret := func(what string, tr jaegerTrace) {
		for name, s := range secrets {
			if s == "" || bytes.Contains(tr.raw, []byte(s)) {
				t.Errorf("%s holds %s (or it is empty)", what, name)
			}
		}
	}
	noSecret("the create trace", tr)

	// Each turn: one trace from the caller to the harness, across the
	// process boundary into the box.
	bridgeSpans := []string{"bridge POST", "bridge.admission", "bridge.run", "harness.start", "harness.first_output"}
	for i, id := range turns {
		tr := readTrace(t, tb.JaegerURL, id, append([]string{"test.turn", "turn"}, bridgeSpans...))
		if n := len(tr.named("turn")); n != 1 {
			t.Errorf("turn %d: trace holds %d turn spans, want 1", i, n)
		}
		childOf(t, tr, "turn", "test.turn")
		childOf(t, tr, "bridge.admission", "bridge POST")
		childOf(t, tr, "bridge.run", "bridge.admission")
		childOf(t, tr, "harness.start", "bridge.run")
		childOf(t, tr, "harness.first_output", "bridge.run")
		// The turn's request reached the bridge with the turn's span as
		// its parent: the bridge's span of it is the turn's child.
		turnID := tr.named("turn")[0].SpanID
		admitted := tr.named("bridge.admission")[0]
		var post jaegerSpan
		for _, s := range tr.named("bridge POST") {
			if s.SpanID == admitted.parent() {
				post = s
			}
		}
		if post.parent() != turnID || tr.service[post.SpanID] != "box-bridge" || tr.service[turnID] != "sandbox-test" {
			t.Errorf("turn %d: the admitting request %s (%s) has parent %s, want the turn span %s of sandbox-test",
				i, post.SpanID, tr.service[post.SpanID], post.parent(), turnID)
		}
		ts := tr.named("turn")[0]
		if ts.tag(provider.AttrOutcome) != provider.StatusCompleted || ts.tag(provider.AttrServedModel) != servedModel ||
			ts.tag(provider.AttrFirstEvent) == "" || ts.tag(provider.AttrOutputTokens) == "" {
			t.Errorf("turn %d: span tags %+v, want outcome, served model, first event and tokens", i, ts.Tags)
		}
		noSecret(fmt.Sprintf("turn %d's trace", i), tr)
		t.Logf("turn trace %s: %d spans (%d of box-bridge)", id, len(tr.spans), countService(tr, "box-bridge"))
	}

	destroyed = true
	if err := env.Destroy(t.Context()); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	var kinds []string
	for _, ev := range events {
		k := string(ev.Type)
		if ev.Reason != "" {
			k += ":" + ev.Reason
		}
		kinds = append(kinds, k)
		if ev.BoxID != env.Box().ID() || ev.Vendor != "docker" || ev.RunTag != p.RunTag() {
			t.Errorf("event %+v: want box %s on docker, run %s", ev, env.Box().ID(), p.RunTag())
		}
	}
	wantKinds := []string{"created", "ready", "turn.started", "turn.ended:completed", "turn.started", "turn.ended:completed", "destroyed:user"}
	if !slices.Equal(kinds, wantKinds) {
		t.Errorf("events = %v, want %v", kinds, wantKinds)
	}
}

func prefixed(p string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = p + n
	}
	return out
}

func countService(tr jaegerTrace, name string) int {
	n := 0
	for _, s := range tr.spans {
		if tr.service[s.SpanID] == name {
			n++
		}
	}
	return n
}
