package sandbox_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/provider/sandbox"
)

func TestCheckRouterURL(t *testing.T) {
	tests := []struct {
		url     string
		wantErr string
		creds   bool
	}{
		{url: "https://router.example", wantErr: ""},
		{url: "http://127.0.0.1:9/v1", wantErr: ""},
		{url: "", wantErr: "absolute http or https"},
		{url: "router.example", wantErr: "absolute http or https"},
		{url: "ftp://router.example", wantErr: "absolute http or https"},
		{url: "http://", wantErr: "absolute http or https"},
		{url: "http://[::1", wantErr: "absolute http or https"},
		{url: "https://u:secret@router.example", wantErr: "credentials", creds: true},
		{url: "ftp://u:secret@router.example", wantErr: "credentials", creds: true},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			err := sandbox.CheckRouterURL(tt.url)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("CheckRouterURL(%q) = %v, want nil", tt.url, err)
			case tt.wantErr == "":
				return
			case err == nil || !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("CheckRouterURL(%q) = %v, want an error with %q", tt.url, err, tt.wantErr)
			}
			if got := errors.Is(err, sandbox.ErrRouterURLCredentials); got != tt.creds {
				t.Errorf("errors.Is(%v, ErrRouterURLCredentials) = %v, want %v", err, got, tt.creds)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q quotes the URL's password", err)
			}
		})
	}
}
