// Package npmlock writes the npm files that make `npm ci` install exactly
// a pinned package tree: a lockfileVersion 3 package-lock.json whose root
// entry matches the package.json beside it. The box image's harness
// installs and the test bed's JavaScript SDK sets both use it. Output is
// deterministic: keys sorted, two-space indent, a closing newline.
package npmlock

import (
	"bytes"
	"encoding/json"
	"maps"
)

// Marshal encodes v as npm writes its files: indented by two spaces,
// HTML characters unescaped, ending with a newline.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Lock renders the package-lock.json of a package named name, version
// 0.0.0, that depends on deps (name to exact version), with the locked
// tree packages (lock paths such as "node_modules/x" to their entries) under
// a root entry matching that package.json.
func Lock(name string, deps map[string]string, packages map[string]json.RawMessage) ([]byte, error) {
	root, err := json.Marshal(struct {
		Name         string            `json:"name"`
		Version      string            `json:"version"`
		Dependencies map[string]string `json:"dependencies"`
	}{name, "0.0.0", deps})
	if err != nil {
		return nil, err
	}
	all := maps.Clone(packages)
	if all == nil {
		all = map[string]json.RawMessage{}
	}
	all[""] = root
	return Marshal(struct {
		Name            string                     `json:"name"`
		Version         string                     `json:"version"`
		LockfileVersion int                        `json:"lockfileVersion"`
		Requires        bool                       `json:"requires"`
		Packages        map[string]json.RawMessage `json:"packages"`
	}{name, "0.0.0", 3, true, all})
}
