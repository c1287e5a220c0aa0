package emukit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestFaultsCheck(t *testing.T) {
	tests := []struct {
		name   string
		faults Faults
		want   string // "" for none
	}{
		{"zero", Faults{}, ""},
		{"full", Faults{ErrorRate: 1, LostRate: 1, Statuses: []int{429, 500, 599}, RetryAfter: time.Second}, ""},
		{"error rate over 1", Faults{ErrorRate: 1.5}, "error rate 1.5"},
		{"negative lost rate", Faults{LostRate: -0.1}, "lost rate -0.1"},
		{"a 404 status", Faults{Statuses: []int{404}}, "fail status 404"},
		{"negative delay", Faults{CreateDelay: -time.Second}, "negative fault duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.faults.Check()
			if (tt.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check() = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestInjectorServe(t *testing.T) {
	tests := []struct {
		name       string
		faults     Faults
		lost       bool
		wantStatus int
		wantHeader string // the wait a 429 asks for
		wantRan    bool   // the handler ran
		wantCounts Counts
	}{
		{"no faults", Faults{}, true, http.StatusOK, "", true, Counts{}},
		{"throttled", Faults{ErrorRate: 1, Statuses: []int{429}, LostRate: 1}, true, http.StatusTooManyRequests, "1", false, Counts{Throttled: 1}},
		{"throttled with a wait", Faults{ErrorRate: 1, Statuses: []int{429}, RetryAfter: 2500 * time.Millisecond}, true,
			http.StatusTooManyRequests, "3", false, Counts{Throttled: 1}},
		{"failed", Faults{ErrorRate: 1, Statuses: []int{502}}, true, http.StatusBadGateway, "", false, Counts{Failed: 1}},
		{"failed after it took effect", Faults{ErrorRate: 1, Statuses: []int{503}, LostRate: 1}, true,
			http.StatusServiceUnavailable, "", true, Counts{Failed: 1, Lost: 1}},
		{"failed, may not take effect", Faults{ErrorRate: 1, Statuses: []int{503}, LostRate: 1}, false,
			http.StatusServiceUnavailable, "", false, Counts{Failed: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := NewInjector(InjectorOptions{Faults: tt.faults,
				Throttled: func(w http.ResponseWriter, _ *http.Request, wait time.Duration) {
					w.Header().Set("Retry-After", strconv.Itoa(Seconds(wait)))
					w.WriteHeader(http.StatusTooManyRequests)
				},
				Failed: func(w http.ResponseWriter, _ *http.Request, status int) { w.WriteHeader(status) },
				Lost:   func(*http.Request) bool { return tt.lost },
			})
			if err != nil {
				t.Fatal(err)
			}
			ran := false
			w := httptest.NewRecorder()
			in.Serve(w, httptest.NewRequest(http.MethodPost, "/x", nil), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				ran = true
				w.WriteHeader(http.StatusOK)
			}))
			if w.Code != tt.wantStatus || w.Header().Get("Retry-After") != tt.wantHeader || ran != tt.wantRan {
				t.Errorf("status %d, Retry-After %q, ran %v; want %d, %q, %v",
					w.Code, w.Header().Get("Retry-After"), ran, tt.wantStatus, tt.wantHeader, tt.wantRan)
			}
			if got := in.Counts(); got != tt.wantCounts {
				t.Errorf("Counts() = %+v, want %+v", got, tt.wantCounts)
			}
		})
	}
}

func TestInjectorSet(t *testing.T) {
	in, err := NewInjector(InjectorOptions{Throttled: func(http.ResponseWriter, *http.Request, time.Duration) {},
		Failed: func(http.ResponseWriter, *http.Request, int) {}})
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Set(Faults{ErrorRate: 2}); err == nil {
		t.Error("Set(rate 2) succeeded")
	}
	want := Faults{ErrorRate: 0.5, VanishAfter: time.Minute}
	if err := in.Set(want); err != nil {
		t.Fatal(err)
	}
	if got := in.Faults(); got.ErrorRate != want.ErrorRate || got.VanishAfter != want.VanishAfter {
		t.Errorf("Faults() = %+v, want %+v", got, want)
	}
	if _, err := NewInjector(InjectorOptions{}); err == nil {
		t.Error("NewInjector without answers succeeded")
	}
}

func TestInjectorDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in, err := NewInjector(InjectorOptions{Faults: Faults{CreateDelay: time.Hour},
			Throttled: func(http.ResponseWriter, *http.Request, time.Duration) {},
			Failed:    func(http.ResponseWriter, *http.Request, int) {}})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if !in.Delay(t.Context()) || time.Since(start) != time.Hour {
			t.Errorf("Delay passed after %v, want it to pass after the hour", time.Since(start))
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if in.Delay(ctx) {
			t.Error("Delay under an ended context passed")
		}
		_ = in.Set(Faults{})
		if !in.Delay(ctx) {
			t.Error("Delay without a delay did not pass at once")
		}
	})
}

func TestNamedImages(t *testing.T) {
	got, err := NamedImages("--template", []string{"base=reg/img:1", "other=reg/o@sha256:ab"})
	if err != nil || len(got) != 2 || got["base"] != "reg/img:1" || got["other"] != "reg/o@sha256:ab" {
		t.Fatalf("NamedImages = %v, %v", got, err)
	}
	for _, bad := range []string{"noimage", "=img", "name="} {
		if _, err := NamedImages("--template", []string{bad}); err == nil || !strings.Contains(err.Error(), "want NAME=IMAGE") {
			t.Errorf("NamedImages(%q) = %v, want a NAME=IMAGE error", bad, err)
		}
	}
}
