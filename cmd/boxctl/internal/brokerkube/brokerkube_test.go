package brokerkube

import (
	"archive/tar"
	"errors"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/tangle-network/boxctl/internal/boxbridgetest"
	"github.com/tangle-network/boxctl/internal/goldentest"
)

func TestMain(m *testing.M) { boxbridgetest.Main(m) }

// TestManifest renders the manifest against its golden file, with and
// without a keys Secret, and refuses bad options.
func TestManifest(t *testing.T) {
	for _, tc := range []struct {
		golden string
		o      Options
	}{
		{"manifest.golden.yaml", Options{Namespace: "boxctl", Image: "registry.example/boxctl@sha256:0123", CertsSecret: "boxctl-broker-tls"}},
		{"manifest-keys.golden.yaml", Options{Namespace: "agents", Image: "registry.example/boxctl:v1", CertsSecret: "tls", KeysSecret: "model-keys"}},
	} {
		got, err := Manifest(tc.o)
		if err != nil {
			t.Fatal(err)
		}
		goldentest.Check(t, filepath.Join("testdata", tc.golden), got)
		docs := strings.Split(string(got), "\n---\n")
		var dep appsv1.Deployment
		if err := yaml.UnmarshalStrict([]byte(docs[len(docs)-1]), &dep); err != nil {
			t.Fatalf("the Deployment does not read back: %v", err)
		}
		pod := dep.Spec.Template.Spec
		c := pod.Containers[0]
		if *dep.Spec.Replicas != 1 || *pod.SecurityContext.RunAsNonRoot != true || !*c.SecurityContext.ReadOnlyRootFilesystem ||
			*pod.AutomountServiceAccountToken {
			t.Errorf("the Deployment is not one non-root, read-only pod without a token: %+v", dep.Spec)
		}
		if (tc.o.KeysSecret != "") != (len(c.EnvFrom) == 1) {
			t.Errorf("keys: envFrom %+v", c.EnvFrom)
		}
	}
	for name, o := range map[string]Options{
		"no image":         {Namespace: "ns", CertsSecret: "s"},
		"a bad namespace":  {Namespace: "Not_A_Name", Image: "i", CertsSecret: "s"},
		"no certs secret":  {Namespace: "ns", Image: "i"},
		"a bad key secret": {Namespace: "ns", Image: "i", CertsSecret: "s", KeysSecret: "UPPER"},
	} {
		if _, err := Manifest(o); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
}

// TestImage pushes an image of a static binary to a registry and reads it
// back: the binary alone at /boxctl with the CA bundle, user 65532,
// entrypoint boxctl broker, fixed times (the same binary, the same
// digest). A dynamically linked binary is a *NotStaticError.
func TestImage(t *testing.T) {
	reg := httptest.NewServer(registry.New())
	t.Cleanup(reg.Close)
	host := strings.TrimPrefix(reg.URL, "http://")
	bin := boxbridgetest.Build(t) // any static binary does
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(bundle, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := ImageOptions{Binary: bin, CABundle: bundle}
	ref, err := Image(t.Context(), host+"/boxctl/broker:test", o)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Image(t.Context(), host+"/boxctl/broker:again", o)
	if err != nil || again[strings.Index(again, "@"):] != ref[strings.Index(ref, "@"):] {
		t.Errorf("a second push of the same binary is %s (%v), the first %s", again, err, ref)
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH || cf.Config.User != "65532:65532" ||
		strings.Join(cf.Config.Entrypoint, " ") != Binary || strings.Join(cf.Config.Cmd, " ") != "broker" {
		t.Errorf("config = %s/%s user %q entrypoint %q cmd %q", cf.OS, cf.Architecture, cf.Config.User, cf.Config.Entrypoint, cf.Config.Cmd)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers = %d, %v; want one", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]int64{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = h.Mode
	}
	fi, _ := os.Stat(bin)
	if files["boxctl"] != 0o755 || files["etc/ssl/certs/ca-certificates.crt"] != 0o644 || files["tmp/"] != 0o1777 || len(files) != 6 {
		t.Errorf("the layer holds %v (binary of %d bytes)", files, fi.Size())
	}

	for _, bad := range []string{"/bin/sh", bundle} { // Debian's sh is dynamically linked
		if _, err := Image(t.Context(), host+"/boxctl/broker:bad", ImageOptions{Binary: bad}); err == nil {
			t.Errorf("an image of %s was pushed", bad)
		} else if _, ok := errors.AsType[*NotStaticError](err); !ok {
			t.Errorf("an image of %s: %v, want a *NotStaticError", bad, err)
		}
	}
}

// TestLoopback: only localhost and loopback addresses are spoken to over
// plain HTTP without being asked.
func TestLoopback(t *testing.T) {
	for ref, want := range map[string]bool{
		"127.0.0.1:5000/x":         true,
		"localhost:5000/x":         true,
		"localhost/x":              true,
		"[::1]:5000/x":             true,
		"127.evil.example:5000/x":  false,
		"registry.example/x":       false,
		"10.0.0.1:5000/x":          false,
		"localhost.evil.example/x": false,
	} {
		if got := loopback(ref); got != want {
			t.Errorf("loopback(%q) = %v, want %v", ref, got, want)
		}
	}
}
