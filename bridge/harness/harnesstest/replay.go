package harnesstest

import (
	"bufio"
	"bytes"
	"os"
	"testing"

	"github.com/tangle-network/boxctl/bridge/harness"
)

// Replay feeds the recorded CLI output in the file at path to p, line by
// line as the engine does, and returns every event it produced.
func Replay(t testing.TB, p harness.Parser, path string) []harness.Event {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []harness.Event
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		out = append(out, p.Line(sc.Bytes())...)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return out
}
