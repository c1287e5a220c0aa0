package brokerkube

import (
	"archive/tar"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Binary is where the image holds boxctl.
const Binary = "/boxctl"

// NotStaticError is an executable that cannot run in an image with
// nothing else in it: dynamically linked, or not a Linux ELF file.
type NotStaticError struct {
	Path   string
	Reason string
}

func (e *NotStaticError) Error() string {
	return fmt.Sprintf("brokerkube: %s cannot run alone in an image: %s (build it with CGO_ENABLED=0 for linux)", e.Path, e.Reason)
}

// arch checks that path is a static Linux executable and names its
// architecture as an image platform does.
func arch(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", &NotStaticError{Path: path, Reason: "not an ELF executable"}
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", &NotStaticError{Path: path, Reason: "dynamically linked"}
		}
	}
	if f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
		return "", &NotStaticError{Path: path, Reason: "not for Linux"}
	}
	switch f.Machine {
	case elf.EM_X86_64:
		return "amd64", nil
	case elf.EM_AARCH64:
		return "arm64", nil
	}
	return "", &NotStaticError{Path: path, Reason: "built for " + f.Machine.String()}
}

// ImageOptions configure Image.
type ImageOptions struct {
	// Binary is a static Linux boxctl. Required.
	Binary string
	// CABundle, when set, is a PEM file of the roots the broker trusts
	// towards its upstreams (the system's, say); the image holds it at
	// /etc/ssl/certs/ca-certificates.crt.
	CABundle string
	// Insecure speaks plain HTTP to the registry (a loopback one is
	// always spoken to so).
	Insecure bool
}

// Image builds the broker's image (Binary alone, the CA bundle beside it,
// user 65532, entrypoint boxctl, argument broker) and pushes it to ref
// with the Docker config's logins; it returns the pushed reference by
// digest. Its files have fixed times: the same binary gives the same
// digest.
func Image(ctx context.Context, ref string, o ImageOptions) (string, error) {
	platform, err := arch(o.Binary)
	if err != nil {
		return "", err
	}
	var opts []name.Option
	if o.Insecure || loopback(ref) {
		opts = append(opts, name.Insecure)
	}
	tag, err := name.ParseReference(ref, opts...)
	if err != nil {
		return "", fmt.Errorf("brokerkube: image %q: %w", ref, err)
	}
	layerFile, err := os.CreateTemp("", "boxctl-broker-layer-*.tar")
	if err != nil {
		return "", err
	}
	defer os.Remove(layerFile.Name())
	defer layerFile.Close()
	if err := writeLayer(layerFile, o); err != nil {
		return "", fmt.Errorf("brokerkube: %w", err)
	}
	layer, err := tarball.LayerFromFile(layerFile.Name())
	if err != nil {
		return "", fmt.Errorf("brokerkube: %w", err)
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: layer,
		History: v1.History{Created: v1.Time{Time: time.Unix(0, 0).UTC()}, CreatedBy: "boxctl broker image"}})
	if err != nil {
		return "", fmt.Errorf("brokerkube: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return "", fmt.Errorf("brokerkube: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", platform, v1.Time{Time: time.Unix(0, 0).UTC()}
	cf.Config.Entrypoint, cf.Config.Cmd = []string{Binary}, []string{"broker"}
	cf.Config.User = fmt.Sprintf("%d:%d", uid, uid)
	cf.Config.Env = []string{"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt", "HOME=/tmp"}
	cf.Config.Labels = map[string]string{"org.opencontainers.image.title": "boxctl credential broker"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return "", fmt.Errorf("brokerkube: %w", err)
	}
	if err := remote.Write(tag, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return "", fmt.Errorf("brokerkube: push %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("brokerkube: %w", err)
	}
	return tag.Context().Digest(d.String()).String(), nil
}

// loopback reports whether ref's registry is on this machine: localhost,
// or a loopback address.
func loopback(ref string) bool {
	host, _, _ := strings.Cut(ref, "/")
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// writeLayer writes the image's one layer: the binary, the CA bundle, an
// empty /tmp.
func writeLayer(w io.Writer, o ImageOptions) error {
	tw := tar.NewWriter(w)
	mtime := time.Unix(0, 0)
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, ModTime: mtime, Format: tar.FormatPAX})
	}
	file := func(name, src string, mode int64) error {
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: st.Size(), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err = io.Copy(tw, f)
		return err
	}
	if err := dir("tmp/", 0o1777); err != nil {
		return err
	}
	if err := file(strings.TrimPrefix(Binary, "/"), o.Binary, 0o755); err != nil {
		return err
	}
	if o.CABundle != "" {
		for _, d := range []string{"etc/", "etc/ssl/", "etc/ssl/certs/"} {
			if err := dir(d, 0o755); err != nil {
				return err
			}
		}
		if err := file("etc/ssl/certs/ca-certificates.crt", o.CABundle, 0o644); err != nil {
			return err
		}
	}
	return tw.Close()
}
