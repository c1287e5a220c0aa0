package conformance

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
)

// Repo is the repository the box.clone case clones into a box's
// workspace.
type Repo struct {
	// URL is the repository as the box reaches it.
	URL string
	// GitRef is checked out after the clone; empty means the default
	// branch.
	GitRef string
	// File, when set, must hold Content in the checkout.
	File, Content string
}

// gitRepo is a tiny git repository served over git's dumb HTTP protocol
// (HEAD, info/refs and loose objects), written without a git binary: two
// commits on main, the first tagged v1, each with one file whose content
// names its commit.
type gitRepo struct {
	files map[string][]byte // path under the repository root -> content
}

const (
	repoFile  = "CONFORMANCE"
	repoTag   = "v1"
	repoFirst = "the first commit of the conformance repository\n"
)

func newGitRepo() *gitRepo {
	r := &gitRepo{files: map[string][]byte{}}
	var parent string
	var first string
	for i, content := range []string{repoFirst, "the second commit of the conformance repository\n"} {
		blob := r.object("blob", []byte(content))
		tree := r.object("tree", append([]byte("100644 "+repoFile+"\x00"), mustHex(blob)...))
		var c strings.Builder
		fmt.Fprintf(&c, "tree %s\n", tree)
		if parent != "" {
			fmt.Fprintf(&c, "parent %s\n", parent)
		}
		stamp := fmt.Sprintf("boxctl <boxctl@example.invalid> %d +0000", 1700000000+i)
		fmt.Fprintf(&c, "author %s\ncommitter %s\n\ncommit %d\n", stamp, stamp, i+1)
		parent = r.object("commit", []byte(c.String()))
		if i == 0 {
			first = parent
		}
	}
	r.files["HEAD"] = []byte("ref: refs/heads/main\n")
	r.files["info/refs"] = []byte(parent + "\trefs/heads/main\n" + first + "\trefs/tags/" + repoTag + "\n")
	r.files["objects/info/packs"] = []byte("\n")
	return r
}

// object stores a loose object and returns its id.
func (r *gitRepo) object(kind string, body []byte) string {
	raw := append([]byte(fmt.Sprintf("%s %d\x00", kind, len(body))), body...)
	sum := sha1.Sum(raw)
	id := hex.EncodeToString(sum[:])
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	_, _ = w.Write(raw)
	_ = w.Close()
	r.files["objects/"+id[:2]+"/"+id[2:]] = z.Bytes()
	return id
}

func mustHex(id string) []byte {
	b, _ := hex.DecodeString(id)
	return b
}

// ServeHTTP serves the repository's files, whatever the query (a smart
// client's ?service= probe gets the dumb answer and falls back).
func (r *gitRepo) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, ok := r.files[strings.TrimPrefix(req.URL.Path, "/")]
	if !ok || (req.Method != http.MethodGet && req.Method != http.MethodHead) {
		http.NotFound(w, req)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(b)
}
