package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// hang makes the route key admit or attach to a run and then stream
// nothing more until the client goes away: a run that never ends.
func hang(f *fakeBridge, key string) {
	f.routes[key] = func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			if fr, _ := f.chatHeaders(w, r); fr == nil {
				return
			}
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}
}

// inProcess serves the fake's requests in the calling goroutine, so a
// synctest bubble holds every goroutine of a request.
func inProcess(f *fakeBridge) func(*Options) {
	return func(o *Options) { o.HTTPClient = &http.Client{Transport: handlerTransport{http.HandlerFunc(f.serve)}} }
}

func TestStream_timeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	tests := []struct {
		name   string
		native bool
		prompt bool // through Session.Prompt rather than Stream
	}{
		{"one-shot Stream", false, false},
		{"native Stream", true, false},
		{"one-shot Prompt", false, true},
		{"native Prompt", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, loadTranscript(t, "canonical_ok.sse"))
			var env *Environment
			if tt.native {
				env = nativeEnv(t, f, "")
				hang(f, "GET /v1/runs/exec-timeout/events")
			} else {
				env = newEnv(t, f)
				hang(f, "POST /v1/chat/completions")
			}
			turn := Turn{Prompt: "hi", SessionID: "s", ExecutionID: "exec-timeout", Timeout: timeout}
			var events []Event
			var err error
			start := time.Now()
			if tt.prompt {
				s, _ := env.Session("s", SessionOptions{})
				var res *TurnResult
				res, err = s.Prompt(t.Context(), turn)
				if res == nil || res.Status != StatusFailed || res.Success || !strings.Contains(res.Error, "turn timeout after 200ms") {
					t.Errorf("Prompt result = %+v, want failed naming the timeout", res)
				}
				if res != nil {
					events = res.Events
				}
			} else {
				events, err = drain(env.Stream(t.Context(), turn))
			}
			if elapsed := time.Since(start); elapsed < timeout {
				t.Errorf("the turn ended after %s, before its timeout", elapsed)
			}
			var te *TimeoutError
			if !errors.As(err, &te) || te.Timeout != timeout || te.RunID != "exec-timeout" || !errors.Is(err, ErrTurnTimeout) {
				t.Fatalf("error = %v, want a *TimeoutError of run exec-timeout after 200ms", err)
			}
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				t.Errorf("error = %v, want it distinct from the caller's context errors", err)
			}
			if len(events) == 0 {
				t.Fatal("no terminal event")
			}
			last := events[len(events)-1]
			if last.Type != EventStatus || last.Status != StatusFailed || !strings.Contains(last.Detail, "turn timeout after 200ms") || last.RunID != "exec-timeout" {
				t.Errorf("last event = %+v, want a failed status of run exec-timeout naming the timeout", last)
			}
			f.mu.Lock()
			reasons := append([]string(nil), f.reasons...)
			status := f.runs["exec-timeout"].status
			f.mu.Unlock()
			if len(reasons) != 1 || reasons[0] != "turn timeout after 200ms" {
				t.Errorf("cancellation reasons = %q, want one naming the timeout", reasons)
			}
			if status != wire.StatusCancelled {
				t.Errorf("bridge run status = %q, want cancelled", status)
			}
		})
	}
}

// TestStream_callerContext keeps the caller's context errors its own,
// with and without a turn Timeout: the run is cancelled as cleanup, and
// nothing names a timeout.
func TestStream_callerContext(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration
		end     func(f *fakeBridge) (context.Context, context.CancelFunc)
		want    error
	}{
		{"cancel", 0, cancelOnStart, context.Canceled},
		{"cancel under a turn timeout", time.Minute, cancelOnStart, context.Canceled},
		{"caller deadline under a longer turn timeout", time.Minute, func(*fakeBridge) (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 100*time.Millisecond)
		}, context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, "")
			hang(f, "POST /v1/chat/completions")
			env := newEnv(t, f)
			ctx, cancel := tt.end(f)
			defer cancel()
			events, err := drain(env.Stream(ctx, Turn{Prompt: "hi", Timeout: tt.timeout}))
			if !errors.Is(err, tt.want) || errors.Is(err, ErrTurnTimeout) {
				t.Errorf("Stream error = %v, want %v and no turn timeout", err, tt.want)
			}
			for _, ev := range events {
				if ev.Status == StatusFailed {
					t.Errorf("event %+v reports a failure the caller caused", ev)
				}
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.reasons) != 1 || f.reasons[0] != reasonCleanup {
				t.Errorf("cancellation reasons = %q, want one %q", f.reasons, reasonCleanup)
			}
		})
	}
}

func cancelOnStart(f *fakeBridge) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-f.started; cancel() }()
	return ctx, cancel
}

// TestDispatch_timeout checks the Provider-owned watcher of a dispatched
// turn's Timeout, in a synctest bubble.
func TestDispatch_timeout(t *testing.T) {
	tests := []struct {
		name  string
		final string // the run's status once its stream was served
		close bool   // Provider.Close before the timeout
		want  []string
	}{
		{"run still live", wire.StatusRunning, false, []string{"turn timeout after 5s"}},
		{"run ended first", wire.StatusDone, false, nil},
		{"provider closed first", wire.StatusRunning, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, loadTranscript(t, "legacy_ok.sse"))
			f.final = tt.final
			synctest.Test(t, func(t *testing.T) {
				env := newEnv(t, f, inProcess(f))
				ref, err := env.Dispatch(t.Context(), Turn{Prompt: "hi", Timeout: 5 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(4 * time.Second)
				synctest.Wait()
				if n := f.count("POST /v1/runs/"); n != 0 {
					t.Fatalf("cancel requests before the timeout = %d, want 0", n)
				}
				if tt.close {
					if err := env.p.Close(t.Context()); err != nil {
						t.Fatalf("Close: %v", err)
					}
				}
				time.Sleep(time.Second)
				synctest.Wait()
				f.mu.Lock()
				reasons, status := f.reasons, f.runs[ref.ControlRef.RunID].status
				f.mu.Unlock()
				if fmt.Sprint(reasons) != fmt.Sprint(tt.want) {
					t.Errorf("cancellation reasons = %q, want %q", reasons, tt.want)
				}
				if tt.want != nil && status != wire.StatusCancelled {
					t.Errorf("bridge run status = %q, want cancelled", status)
				}
			})
		})
	}
}

func TestProvider_Close(t *testing.T) {
	t.Run("waits for a pending background cancellation", func(t *testing.T) {
		f := newFake(t, loadTranscript(t, "legacy_ok.sse"))
		f.final = wire.StatusRunning
		synctest.Test(t, func(t *testing.T) {
			env := newEnv(t, f, inProcess(f))
			p := env.p
			ref := dispatch(t, env, "s")
			gate := make(chan struct{})
			f.mu.Lock()
			f.routes["POST /v1/runs/"+ref.RunID+"/cancel"] = func(w http.ResponseWriter, r *http.Request) {
				<-gate // the bridge is slow to confirm
				f.cancel(w, r, ref.RunID)
			}
			f.mu.Unlock()
			s, _ := env.Session("s", SessionOptions{})
			ctx, cancel := context.WithCancel(t.Context())
			cancelled := make(chan error, 1)
			go func() { _, err := s.Cancel(ctx); cancelled <- err }()
			synctest.Wait() // the cancellation reached the bridge
			cancel()
			if err := <-cancelled; !errors.Is(err, context.Canceled) {
				t.Fatalf("Cancel with an ended ctx = %v, want context.Canceled", err)
			}

			ended, stop := context.WithCancel(t.Context())
			stop()
			if err := p.Close(ended); !errors.Is(err, context.Canceled) {
				t.Errorf("Close(ended ctx) with work pending = %v, want context.Canceled", err)
			}
			closed := make(chan error, 1)
			go func() { closed <- p.Close(t.Context()) }()
			synctest.Wait()
			select {
			case err := <-closed:
				t.Fatalf("Close returned %v while a cancellation was pending", err)
			default:
			}
			close(gate)
			if err := <-closed; err != nil {
				t.Fatalf("Close: %v", err)
			}
			if st := f.run(ref.RunID).status; st != wire.StatusCancelled {
				t.Errorf("bridge run status after Close = %q, want cancelled", st)
			}
			if err := p.Close(t.Context()); err != nil {
				t.Errorf("second Close = %v, want nil", err)
			}
		})
	})

	t.Run("refuses new turns", func(t *testing.T) {
		f := newFake(t, loadTranscript(t, "legacy_ok.sse"))
		env := newEnv(t, f)
		p := env.p
		ref := dispatch(t, env, "s")
		for range 2 { // idempotent
			if err := p.Close(t.Context()); err != nil {
				t.Fatalf("Close: %v", err)
			}
		}
		before := len(f.log())
		s, _ := env.Session("s", SessionOptions{})
		refusals := map[string]func() error{
			"Stream": func() error { _, err := drain(env.Stream(t.Context(), Turn{Prompt: "hi"})); return err },
			"Dispatch": func() error {
				_, err := env.Dispatch(t.Context(), Turn{Prompt: "hi"})
				return err
			},
			"Prompt": func() error { _, err := s.Prompt(t.Context(), Turn{Prompt: "hi"}); return err },
			"ContinueNative": func() error {
				_, err := s.ContinueNative(t.Context(), wire.ContinuationRequest{}, wire.ContinuationTurn{})
				return err
			},
			"Create": func() error {
				_, err := p.Create(t.Context(), CreateRequest{Profile: Profile{Name: "late", Harness: "claude-code"}})
				return err
			},
		}
		for name, call := range refusals {
			if err := call(); !errors.Is(err, ErrClosed) {
				t.Errorf("%s after Close = %v, want ErrClosed", name, err)
			}
		}
		if n := len(f.log()); n != before {
			t.Errorf("refused calls made %d requests, want none", n-before)
		}
		// Control of existing runs keeps working.
		if st, err := s.Status(t.Context()); err != nil || st.Snapshot.ID != ref.RunID {
			t.Errorf("Status after Close = %+v, %v", st, err)
		}
		if res, err := s.Result(t.Context()); err != nil || !res.Success {
			t.Errorf("Result after Close = %+v, %v", res, err)
		}
	})
}
