package routerstub

import (
	"strings"
	"testing"
	"time"
)

func TestEnd(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		until    string
		lifetime time.Duration
		want     time.Time
		wantErr  string
	}{
		{want: time.Time{}},
		{lifetime: time.Minute, want: now.Add(time.Minute)},
		{until: "1900000000", want: time.Unix(1900000000, 0)},
		{until: "2030-01-02T04:00:00Z", want: time.Date(2030, 1, 2, 4, 0, 0, 0, time.UTC)},
		{until: "tomorrow", wantErr: "want RFC 3339"},
		{until: "1900000000", lifetime: time.Minute, wantErr: "exclude each other"},
		{lifetime: -time.Second, wantErr: "want a positive duration"},
	}
	for _, tt := range tests {
		got, err := End(tt.until, tt.lifetime, now)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("End(%q, %v) error = %v, want %q", tt.until, tt.lifetime, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !got.Equal(tt.want) {
			t.Errorf("End(%q, %v) = %v, %v; want %v", tt.until, tt.lifetime, got, err, tt.want)
		}
	}
}
