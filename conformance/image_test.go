package conformance

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestResolveImage(t *testing.T) {
	const digest = "sha256:" + "ab0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd"
	missing := filepath.Join(t.TempDir(), "none.json")
	tests := []struct {
		name    string
		src     ImageSource
		want    Image
		wantErr bool
	}{
		{"reference with its digest", ImageSource{Image: "reg.example/box@" + digest, Vendor: "e2b"},
			Image{Reference: "reg.example/box@" + digest, Digest: digest}, false},
		{"reference without a digest off docker", ImageSource{Image: "tpl-1", Vendor: "e2b"}, Image{Reference: "tpl-1"}, false},
		{"last build of the target", ImageSource{Vendor: "e2b", Last: &Built{Target: "e2b", Image: "tpl-2", Digest: digest}},
			Image{Reference: "tpl-2", Digest: digest}, false},
		{"last build of another target", ImageSource{Vendor: "e2b", Last: &Built{Target: "docker", Image: "x"}}, Image{}, true},
		{"no image at all", ImageSource{Vendor: "e2b"}, Image{}, true},
		{"missing record", ImageSource{BuildRecord: missing, Vendor: "e2b"}, Image{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolveImage(context.Background(), tt.src, nil)
			if tt.wantErr {
				var ie *ImageError
				if !errors.As(err, &ie) {
					t.Fatalf("ResolveImage = %+v, %v; want an *ImageError", got, err)
				}
				return
			}
			if err != nil || got.Reference != tt.want.Reference || got.Digest != tt.want.Digest {
				t.Fatalf("ResolveImage = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	var ie *ImageError
	if _, err := ResolveImage(context.Background(), ImageSource{BuildRecord: bad, Vendor: "e2b"}, nil); !errors.As(err, &ie) {
		t.Fatalf("a broken record: %v, want an *ImageError", err)
	}
}
