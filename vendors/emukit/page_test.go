package emukit

import (
	"errors"
	"net/url"
	"testing"
)

func TestReadPage(t *testing.T) {
	tests := []struct {
		query              string
		wantLimit, wantPos int
		wantParam          string // of the PageError; "" for none
	}{
		{"", 100, 0, ""},
		{"limit=7", 7, 0, ""},
		{"limit=200&cursor=" + PageToken(42), 200, 42, ""},
		{"limit=0", 0, 0, "limit"},
		{"limit=201", 0, 0, "limit"},
		{"limit=x", 0, 0, "limit"},
		{"cursor=%21%21", 0, 0, "cursor"},
		{"cursor=" + PageToken(-1), 0, 0, "cursor"},
	}
	for _, tt := range tests {
		q, _ := url.ParseQuery(tt.query)
		limit, pos, err := ReadPage(q, "limit", "cursor", 100, 200)
		var pe *PageError
		if errors.As(err, &pe) != (tt.wantParam != "") || pe != nil && pe.Param != tt.wantParam {
			t.Errorf("ReadPage(%s) error = %v, want one of %q", tt.query, err, tt.wantParam)
			continue
		}
		if limit != tt.wantLimit || pos != tt.wantPos {
			t.Errorf("ReadPage(%s) = %d, %d; want %d, %d", tt.query, limit, pos, tt.wantLimit, tt.wantPos)
		}
	}
}
