package e2bemu

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"

	"github.com/tangle-network/boxctl/vendors/emukit"
)

// Snapshots (spec/openapi.yml): POST /sandboxes/{sandboxID}/snapshots
// commits a running sandbox's container (paused for the commit, running
// on after it, as E2B checkpoints it in place) into an image, registered
// as a template: its snapshotID ("<templateID>:<tag>", or
// "<name>:<tag>" when named) is a templateID POST /v2/sandboxes takes,
// whose sandboxes start a container of that image. A paused sandbox is not
// live on E2B (its state is a snapshot of its own), so its snapshot is 404,
// as there. GET /snapshots lists them; DELETE /templates/{templateID}
// deletes a template, refused while sandboxes of it run or are paused, and
// removes the images the emulator committed for it. Close removes the
// images of every snapshot left.

// snap is one tag of a snapshot template.
type snap struct {
	image     string // the committed image, by reference
	sandboxID string // the sandbox it was taken of
	created   time.Time
}

// snapshotRepo is the repository of the committed images, tagged
// <templateID>-<tag>-<random>, so no prune of dangling images takes them.
const snapshotRepo = "e2bemu-snapshot"

// validTag is a tag E2B and the engine both take.
var validTag = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)

func (s *Server) routeSnapshots() {
	s.api.HandleFunc("POST /sandboxes/{sandboxID}/snapshots", s.handleSnapshot)
	s.api.HandleFunc("GET /snapshots", s.handleListSnapshots)
	s.api.HandleFunc("DELETE /templates/{templateID}", s.handleDeleteTemplate)
}

func (s *Server) handleSnapshot(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name *string `json:"name"`
	}
	if r.ContentLength != 0 {
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
			writeError(w, http.StatusBadRequest, "Error when parsing request: "+err.Error())
			return
		}
	}
	name, tag := "", defaultTag
	if req.Name != nil {
		n, t, hasTag := strings.Cut(*req.Name, ":")
		if hasTag {
			tag = t
		}
		if n == "" || strings.ContainsAny(n, " \t") || !validTag.MatchString(tag) {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid name: %q", *req.Name))
			return
		}
		name = n
	}
	id := r.PathValue("sandboxID")
	sb, ok := s.lookup(id)
	if ok {
		s.mu.Lock()
		ok = !sb.paused
		s.mu.Unlock()
	}
	if !ok {
		s.notFound(w, id)
		return
	}
	if !sb.snapMu.TryLock() {
		writeError(w, http.StatusConflict, fmt.Sprintf("Sandbox '%s' cannot be snapshotted while in 'snapshotting' state", id))
		return
	}
	defer sb.snapMu.Unlock()

	s.mu.Lock()
	t := s.templates[name]
	if name == "" || t == nil || t.snaps == nil {
		t = &template{id: randomString(20, lowerDigits), name: name, ready: true, snaps: map[string]*snap{}}
	}
	tplID := t.id
	s.mu.Unlock()
	ref := snapshotRepo + ":" + tplID + "-" + tag + "-" + randomString(6, lowerDigits)
	begin := time.Now()
	_, err := s.cli.ContainerCommit(r.Context(), sb.box.ID(), container.CommitOptions{Reference: ref, Pause: true,
		Comment: "snapshot of sandbox " + id})
	if err != nil {
		s.log.Warn("snapshot sandbox", "sandbox", id, "err", err)
		writeError(w, http.StatusInternalServerError, "Error creating snapshot template")
		return
	}
	s.mu.Lock()
	if old := t.snaps[tag]; old != nil {
		t.retired = append(t.retired, old.image) // sandboxes of it may run
	}
	t.snaps[tag] = &snap{image: ref, sandboxID: id, created: time.Now().UTC()}
	s.templates[tplID] = t
	if name != "" {
		s.templates[name] = t
	}
	s.mu.Unlock()
	s.log.Info("sandbox snapshotted", "sandbox", id, "template", tplID, "tag", tag, "took", time.Since(begin))
	writeJSON(w, http.StatusCreated, snapshotInfo(t, tag))
}

// snapshotInfo is SnapshotInfo of a tag of t.
func snapshotInfo(t *template, tag string) map[string]any {
	names := []string{}
	ref := t.id
	if t.name != "" {
		names, ref = append(names, t.name), t.name
	}
	return map[string]any{"snapshotID": ref + ":" + tag, "names": names}
}

func (s *Server) handleListSnapshots(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, offset, err := emukit.ReadPage(q, "limit", "nextToken", 100, 100)
	if pe := (*emukit.PageError)(nil); errors.As(err, &pe) && pe.Param == "limit" {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid limit %q: want 1 to 100", pe.Value))
		return
	} else if err != nil {
		writeError(w, http.StatusBadRequest, "Invalid next token")
		return
	}
	sid, name := q.Get("sandboxID"), q.Get("name")
	wantName, wantTag, hasTag := strings.Cut(name, ":")
	type row struct {
		t   *template
		tag string
		sn  *snap
	}
	var rows []row
	s.mu.Lock()
	for key, t := range s.templates {
		if t.snaps == nil || key != t.id || (name != "" && wantName != t.id && wantName != t.name) {
			continue
		}
		for tag, sn := range t.snaps {
			if (sid == "" || sn.sandboxID == sid) && (!hasTag || tag == wantTag) {
				rows = append(rows, row{t, tag, sn})
			}
		}
	}
	out := make([]map[string]any, 0, len(rows))
	slices.SortFunc(rows, func(a, b row) int {
		return cmp.Or(b.sn.created.Compare(a.sn.created), strings.Compare(a.t.id, b.t.id), strings.Compare(a.tag, b.tag))
	})
	page := rows[min(offset, len(rows)):min(offset+limit, len(rows))]
	for _, rw := range page {
		out = append(out, snapshotInfo(rw.t, rw.tag))
	}
	s.mu.Unlock()
	if offset+limit < len(rows) {
		w.Header().Set("X-Next-Token", emukit.PageToken(offset+limit))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleDeleteTemplate(w http.ResponseWriter, r *http.Request) {
	ref := r.PathValue("templateID")
	s.mu.Lock()
	t, _ := s.resolveLocked(ref)
	if t == nil {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, fmt.Sprintf("template '%s' not found", ref))
		return
	}
	for _, sb := range s.sandboxes {
		if sb.templateID == t.id {
			s.mu.Unlock()
			writeError(w, http.StatusBadRequest, fmt.Sprintf("cannot delete template '%s' because there are %s sandboxes using it",
				t.id, stateOf(sb)))
			return
		}
	}
	for key, o := range s.templates {
		if o == t {
			delete(s.templates, key)
		}
	}
	imgs := snapImages(t)
	s.mu.Unlock()
	s.removeImages(r.Context(), imgs)
	s.log.Info("template deleted", "template", t.id)
	w.WriteHeader(http.StatusNoContent)
}

// snapImages are the images committed for t, those a later snapshot of
// the same name and tag replaced too.
func snapImages(t *template) []string {
	out := slices.Clone(t.retired)
	for _, sn := range t.snaps {
		out = append(out, sn.image)
	}
	return out
}

// removeImages removes committed images; one still used by a container
// of another engine client stays.
func (s *Server) removeImages(ctx context.Context, imgs []string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	for _, img := range imgs {
		if _, err := s.cli.ImageRemove(ctx, img, image.RemoveOptions{PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
			s.log.Warn("remove a snapshot's image", "image", img, "err", err)
		}
	}
}

// snapshotImages returns the images of every snapshot template left.
func (s *Server) snapshotImages() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for key, t := range s.templates {
		if key == t.id {
			out = append(out, snapImages(t)...)
		}
	}
	return out
}
