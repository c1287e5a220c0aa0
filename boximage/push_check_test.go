package boximage

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

func TestRegistryExporter_pushErrors(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()

	exp, err := NewRegistryExporter("127.0.0.1:5999/boxctl/box:t1")
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{"s3cret-pass"}
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantMsg    string
		wantDenied bool
		wantText   string
	}{
		{"registry error body", &transport.Error{StatusCode: 403, Errors: []transport.Diagnostic{
			{Code: transport.DeniedErrorCode, Message: "no push to boxctl/box for s3cret-pass"}}},
			403, "DENIED: no push to boxctl/box for [redacted]", true, "docker login 127.0.0.1:5999"},
		{"401 relayed by BuildKit", errors.New("build: failed to solve: failed to push 127.0.0.1:5999/boxctl/box:t1: " +
			"unexpected status from HEAD request to http://127.0.0.1:5999/v2/boxctl/box/blobs/sha256:ab: 401 Unauthorized"),
			401, "unexpected status from HEAD request to http://127.0.0.1:5999/v2/boxctl/box/blobs/sha256:ab: 401 Unauthorized",
			true, "(HTTP 401 Unauthorized)"},
		{"denied relayed by BuildKit", errors.New("failed to solve: failed to push 127.0.0.1:5999/boxctl/box:t1: denied: tag is immutable"),
			0, "denied: tag is immutable", true, "docker login"},
		{"registry down", errors.New("failed to push 127.0.0.1:5999/boxctl/box:t1: dial tcp 127.0.0.1:5999: connect: connection refused"),
			0, "dial tcp 127.0.0.1:5999: connect: connection refused", false, "check that the registry 127.0.0.1:5999 is up"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pe := exp.newPushError(tt.err, secrets)
			if pe.Status != tt.wantStatus || pe.Message != tt.wantMsg || errors.Is(pe, ErrPushDenied) != tt.wantDenied {
				t.Errorf("newPushError() = status %d, message %q, denied %v; want %d, %q, %v",
					pe.Status, pe.Message, errors.Is(pe, ErrPushDenied), tt.wantStatus, tt.wantMsg, tt.wantDenied)
			}
			if !strings.Contains(pe.Error(), tt.wantText) || !strings.Contains(pe.Error(), "127.0.0.1:5999/boxctl/box:t1") {
				t.Errorf("newPushError() = %q, want the reference and %q", pe, tt.wantText)
			}
			if strings.Contains(pe.Error(), "s3cret-pass") || !errors.Is(pe, tt.err) {
				t.Errorf("newPushError() = %q: echoes the password or does not wrap its cause", pe)
			}
		})
	}

	t.Run("check against a registry that is down", func(t *testing.T) {
		exp, err := NewRegistryExporter(closed + "/boxctl/box:t1")
		if err != nil {
			t.Fatal(err)
		}
		err = exp.checkPush(t.Context(), newAuthLookup(nil))
		var pe *PushError
		if !errors.As(err, &pe) || errors.Is(err, ErrPushDenied) || !strings.Contains(err.Error(), "connection refused") ||
			!strings.Contains(err.Error(), "check that the registry "+closed+" is up") {
			t.Errorf("checkPush() = %v, want a *PushError naming the unreachable registry", err)
		}
	})
}
