package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// profileEntry is one profile of the catalog, read at start.
type profileEntry struct {
	meta wire.Profile
	body json.RawMessage
}

// loadProfiles reads the catalog of dir: every <id>.json that holds a JSON
// object, in name order. A directory that does not exist is an empty
// catalog; a file that is not a JSON object is skipped and logged.
func (s *Server) loadProfiles(dir string) ([]profileEntry, error) {
	if dir == "" {
		return nil, nil
	}
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("server: profiles in %s: %w", dir, err)
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	slices.Sort(names)
	var out []profileEntry
	for _, name := range names {
		data, err := os.ReadFile(name)
		var head struct {
			Name        string   `json:"name"`
			Description string   `json:"description"`
			Tags        []string `json:"tags"`
		}
		var obj map[string]json.RawMessage
		if err == nil {
			err = json.Unmarshal(data, &obj)
		}
		if err == nil && obj == nil {
			err = errors.New("not a JSON object")
		}
		if err == nil {
			err = json.Unmarshal(data, &head)
		}
		if err != nil {
			s.log.Warn("skip profile", "path", name, "err", err)
			continue
		}
		id := strings.TrimSuffix(filepath.Base(name), ".json")
		out = append(out, profileEntry{body: data, meta: wire.Profile{ID: id, Name: head.Name, Description: head.Description,
			Tags: head.Tags, LoadedAt: rfc3339(time.Now())}})
	}
	return out, nil
}

func (s *Server) listProfiles(w http.ResponseWriter, r *http.Request) {
	out := wire.ProfileList{Object: "list", Data: []wire.Profile{}}
	for _, p := range s.profiles {
		out.Data = append(out.Data, p.meta)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getProfile(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	for _, p := range s.profiles {
		if p.meta.ID == id {
			writeJSON(w, http.StatusOK, wire.ProfileDocument{ID: id, Profile: p.body})
			return
		}
	}
	writeError(w, wire.TypeNotFound, "profile not found: "+id)
}
