// Package goldentest checks what a test makes against a file in the tree
// (a golden file under testdata, a published schema) and rewrites the
// file when the tests run with -update:
//
//	go test ./boximage -run '^TestRender_golden$' -update
//
// The -update flag is defined here once, so a test package that imports
// goldentest must not define its own. A failure names the file and the
// command that rewrites it.
//
// The package imports nothing of ours, so every package's tests may use it.
package goldentest
