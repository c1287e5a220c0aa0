// Package pinstest provides an in-process npm registry for tests of code
// that reads pins from a registry or resolves lock files with npm.
//
// Registry serves the shapes of the public registry (registry.npmjs.org):
// packuments at /<name>, version documents at /<name>/<version-or-tag> and
// real gzipped tarballs at /<name>/-/<base>-<version>.tgz whose sha512 is
// the published integrity, so npm itself can resolve and install from it.
package pinstest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Version describes one published version.
type Version struct {
	// Name and Version identify it.
	Name, Version string
	// Dependencies and OptionalDependencies are as in package.json.
	Dependencies, OptionalDependencies map[string]string
	// Bin maps command names to files; each file prints Version when run by node.
	Bin map[string]string
	// OS and CPU restrict the platforms it installs on.
	OS, CPU []string
}

// Registry is an npm registry on an httptest server. It is safe for
// concurrent use. Publish what a test needs, then point clients at URL.
type Registry struct {
	// URL is the registry's base URL, with a trailing slash.
	URL string

	srv  *httptest.Server
	mu   sync.Mutex
	docs map[string]*packument
	tars map[string][]byte // URL path -> tarball
	log  []string
}

type packument struct {
	Name     string                    `json:"name"`
	DistTags map[string]string         `json:"dist-tags"`
	Versions map[string]map[string]any `json:"versions"`
}

// NewRegistry starts a registry that closes when the test ends.
func NewRegistry(t testing.TB) *Registry {
	t.Helper()
	r := &Registry{docs: map[string]*packument{}, tars: map[string][]byte{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	r.URL = r.srv.URL + "/"
	return r
}

// Publish adds a version, makes it the latest, and returns its integrity.
func (r *Registry) Publish(v Version) string {
	pj := map[string]any{"name": v.Name, "version": v.Version}
	for k, m := range map[string]map[string]string{"dependencies": v.Dependencies,
		"optionalDependencies": v.OptionalDependencies, "bin": v.Bin} {
		if len(m) > 0 {
			pj[k] = m
		}
	}
	if len(v.OS) > 0 {
		pj["os"] = v.OS
	}
	if len(v.CPU) > 0 {
		pj["cpu"] = v.CPU
	}
	tgz := tarball(pj, v.Bin, v.Version)
	sum512 := sha512.Sum512(tgz)
	sum1 := sha1.Sum(tgz)
	integrity := "sha512-" + base64.StdEncoding.EncodeToString(sum512[:])
	base := v.Name[strings.LastIndex(v.Name, "/")+1:]
	tarPath := "/" + v.Name + "/-/" + base + "-" + v.Version + ".tgz"

	doc := map[string]any{"_id": v.Name + "@" + v.Version}
	for k, val := range pj {
		doc[k] = val
	}
	doc["dist"] = map[string]any{"integrity": integrity, "shasum": hex.EncodeToString(sum1[:]),
		"tarball": strings.TrimSuffix(r.URL, "/") + tarPath}

	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.docs[v.Name]
	if !ok {
		p = &packument{Name: v.Name, DistTags: map[string]string{}, Versions: map[string]map[string]any{}}
		r.docs[v.Name] = p
	}
	p.Versions[v.Version] = doc
	p.DistTags["latest"] = v.Version
	r.tars[tarPath] = tgz
	return integrity
}

// Requests returns the paths requested so far, in order.
func (r *Registry) Requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.log...)
}

func (r *Registry) serve(w http.ResponseWriter, req *http.Request) {
	p := strings.ReplaceAll(strings.ReplaceAll(req.URL.EscapedPath(), "%2f", "/"), "%2F", "/")
	p, err := url.PathUnescape(p)
	if err != nil || req.Method != http.MethodGet {
		http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, p)
	if tgz, ok := r.tars[p]; ok {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(tgz)
		return
	}
	segs := strings.Split(strings.Trim(p, "/"), "/")
	name, rest := segs[0], segs[1:]
	if strings.HasPrefix(name, "@") && len(segs) > 1 {
		name, rest = segs[0]+"/"+segs[1], segs[2:]
	}
	doc, ok := r.docs[name]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "Not found"})
		return
	}
	switch len(rest) {
	case 0:
		writeJSON(w, http.StatusOK, doc)
	case 1:
		v := rest[0]
		if tagged, ok := doc.DistTags[v]; ok {
			v = tagged
		}
		if m, ok := doc.Versions[v]; ok {
			writeJSON(w, http.StatusOK, m)
			return
		}
		writeJSON(w, http.StatusNotFound, "version not found: "+rest[0])
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "Not found"})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// tarball builds a deterministic npm package tarball: package/package.json
// and one node script per bin entry that prints the version.
func tarball(pj map[string]any, bin map[string]string, version string) []byte {
	files := map[string][]byte{}
	data, _ := json.MarshalIndent(pj, "", "  ")
	files["package/package.json"] = data
	for _, file := range bin {
		files[path.Join("package", file)] = fmt.Appendf(nil, "#!/usr/bin/env node\nconsole.log(%q)\n", version)
	}
	names := slices.Sorted(maps.Keys(files))
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	tw := tar.NewWriter(gz)
	for _, n := range names {
		tw.WriteHeader(&tar.Header{Name: n, Mode: 0o755, Size: int64(len(files[n])), Typeflag: tar.TypeReg})
		tw.Write(files[n])
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}
