package codex

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// totals are Codex's cumulative token counters of a thread.
type totals struct {
	Input       int64 `json:"input_tokens"`
	Cached      int64 `json:"cached_input_tokens"`
	CacheWrite  int64 `json:"cache_write_input_tokens"`
	Output      int64 `json:"output_tokens"`
	Reasoning   int64 `json:"reasoning_output_tokens"`
	cacheWrites bool  // CacheWrite was present
}

func (t *totals) UnmarshalJSON(b []byte) error {
	var raw struct {
		Input      int64  `json:"input_tokens"`
		Cached     int64  `json:"cached_input_tokens"`
		CacheWrite *int64 `json:"cache_write_input_tokens"`
		Output     int64  `json:"output_tokens"`
		Reasoning  int64  `json:"reasoning_output_tokens"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*t = totals{Input: raw.Input, Cached: raw.Cached, Output: raw.Output, Reasoning: raw.Reasoning}
	if raw.CacheWrite != nil {
		t.CacheWrite, t.cacheWrites = *raw.CacheWrite, true
	}
	return nil
}

// since returns the usage between base and t, or nil when a counter went
// backwards (the totals are not of the same thread).
func (t totals) since(base totals) *wire.Usage {
	in, cached, write, out := t.Input-base.Input, t.Cached-base.Cached, t.CacheWrite-base.CacheWrite, t.Output-base.Output
	if in < 0 || cached < 0 || write < 0 || out < 0 {
		return nil
	}
	f := false
	u := &wire.Usage{PromptTokens: in, CompletionTokens: out, TotalTokens: in + out,
		CacheReadInputTokens: &cached, Estimated: &f}
	if t.cacheWrites {
		u.CacheWriteInputTokens = &write
	}
	return u
}

// rolloutTotals returns the cumulative totals Codex last recorded for
// thread in its rollout file under codexHome, or nil when there is none
// to read (the per-turn usage is then unknown).
func rolloutTotals(codexHome, thread string) *totals {
	path := findRollout(codexHome, thread)
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var last *totals
	br := bufio.NewReaderSize(f, 64<<10)
	marker := []byte(`"token_count"`)
	for {
		line, err := br.ReadBytes('\n')
		if bytes.Contains(line, marker) {
			var l struct {
				Type    string `json:"type"`
				Payload struct {
					Type string `json:"type"`
					Info *struct {
						Total *totals `json:"total_token_usage"`
					} `json:"info"`
				} `json:"payload"`
			}
			if json.Unmarshal(line, &l) == nil && l.Type == "event_msg" && l.Payload.Type == "token_count" &&
				l.Payload.Info != nil && l.Payload.Info.Total != nil {
				last = l.Payload.Info.Total
			}
		}
		if err != nil {
			break
		}
	}
	return last
}

// findRollout finds the rollout file of thread: Codex names them
// sessions/YYYY/MM/DD/rollout-<time>-<thread>.jsonl.
func findRollout(codexHome, thread string) string {
	if thread == "" || strings.ContainsAny(thread, `/\`) {
		return ""
	}
	suffix := "-" + thread + ".jsonl"
	found := ""
	for _, dir := range []string{"sessions", "archived_sessions"} {
		filepath.WalkDir(filepath.Join(codexHome, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || found != "" {
				return fs.SkipDir
			}
			if !d.IsDir() && strings.HasPrefix(d.Name(), "rollout-") && strings.HasSuffix(d.Name(), suffix) {
				found = path
				return fs.SkipAll
			}
			return nil
		})
	}
	return found
}
