package boximage_test

import (
	"errors"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/tangle-network/boxctl/boximage"
	"github.com/tangle-network/boxctl/boximage/ecrfake"
)

// awsEnv points the AWS SDK's default chain at static test keys, away from
// any real profile or instance role.
func awsEnv(t *testing.T, keyID string) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("AWS_ACCESS_KEY_ID", keyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret-for-tests")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

func TestECR_Ensure(t *testing.T) {
	fake := ecrfake.New(ecrfake.Options{Registry: "127.0.0.1:5999", AccessKeyID: "AKIATESTKEY"})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	awsEnv(t, "AKIATESTKEY")

	e, err := boximage.NewECR(t.Context(), boximage.WithECREndpoint(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	first, err := e.Ensure(t.Context(), "boxctl/box")
	if err != nil {
		t.Fatalf("Ensure() = %v", err)
	}
	user, pass := fake.Login()
	want := boximage.ECRRepository{Name: "boxctl/box", URI: "127.0.0.1:5999/boxctl/box", Created: true,
		Auth: boximage.RegistryAuth{Username: user, Password: pass}}
	if first != want {
		t.Errorf("Ensure() = %+v, want %+v", first, want)
	}
	if first.Registry() != "127.0.0.1:5999" {
		t.Errorf("Registry() = %s", first.Registry())
	}
	second, err := e.Ensure(t.Context(), "boxctl/box")
	if err != nil || second.Created {
		t.Fatalf("Ensure() again = %+v, %v, want the existing repository", second, err)
	}
	if got := fake.Calls("CreateRepository"); got != 1 {
		t.Errorf("CreateRepository calls = %d, want 1", got)
	}
	id, secret, err := e.AccessKeys(t.Context())
	if err != nil || id != "AKIATESTKEY" || secret != "secret-for-tests" {
		t.Errorf("AccessKeys() = %s, %s, %v", id, secret, err)
	}

	t.Run("invalid name", func(t *testing.T) {
		_, err := e.Ensure(t.Context(), "Bad Name")
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "InvalidParameterException" {
			t.Fatalf("Ensure(Bad Name) = %v, want InvalidParameterException", err)
		}
	})
	t.Run("wrong key", func(t *testing.T) {
		awsEnv(t, "AKIAOTHER")
		e, err := boximage.NewECR(t.Context(), boximage.WithECREndpoint(srv.URL))
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.Ensure(t.Context(), "boxctl/box")
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "UnrecognizedClientException" {
			t.Fatalf("Ensure() with a wrong key = %v, want UnrecognizedClientException", err)
		}
	})
}
