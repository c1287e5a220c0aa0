package main

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestRouterStub_Until(t *testing.T) {
	until := strconv.FormatInt(time.Now().Add(2*time.Second).Unix(), 10)
	for _, args := range [][]string{
		{"router-stub", "--no-auth", "--lifetime", "500ms"},
		{"router-stub", "--no-auth", "--until", until},
	} {
		t.Run(strings.Join(args[2:], " "), func(t *testing.T) {
			start := time.Now()
			_, errOut, stop := startRouterStub(t, args...)
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(errOut.String(), "lifetime over") {
				if time.Now().After(deadline) {
					t.Fatalf("router-stub %v still runs after 10s; stderr: %s", args, errOut)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err := stop(); err != nil {
				t.Errorf("router-stub %v ended with %v, want nil", args, err)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("router-stub %v ran %v", args, took)
			}
		})
	}
}

func TestRouterStubOptions_End(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		o       routerStubOptions
		want    time.Time
		wantErr string
	}{
		{o: routerStubOptions{}, want: time.Time{}},
		{o: routerStubOptions{lifetime: time.Minute}, want: now.Add(time.Minute)},
		{o: routerStubOptions{until: "1900000000"}, want: time.Unix(1900000000, 0)},
		{o: routerStubOptions{until: "2030-01-02T04:00:00Z"}, want: time.Date(2030, 1, 2, 4, 0, 0, 0, time.UTC)},
		{o: routerStubOptions{until: "tomorrow"}, wantErr: "want RFC 3339"},
		{o: routerStubOptions{until: "1900000000", lifetime: time.Minute}, wantErr: "exclude each other"},
		{o: routerStubOptions{lifetime: -time.Second}, wantErr: "want a positive duration"},
	}
	for _, tt := range tests {
		got, err := tt.o.end(now)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("end(%+v) error = %v, want %q", tt.o, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !got.Equal(tt.want) {
			t.Errorf("end(%+v) = %v, %v; want %v", tt.o, got, err, tt.want)
		}
	}
}
