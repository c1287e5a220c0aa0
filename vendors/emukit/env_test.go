package emukit

import (
	"strings"
	"testing"
)

func TestWriteExports(t *testing.T) {
	var b strings.Builder
	if err := WriteExports(&b, [][2]string{{"A_URL", "http://127.0.0.1:1"}, {"A_HOST", "172.18.0.1"}}); err != nil {
		t.Fatal(err)
	}
	if want := "export A_URL=http://127.0.0.1:1\nexport A_HOST=172.18.0.1\n"; b.String() != want {
		t.Errorf("WriteExports wrote %q, want %q", b.String(), want)
	}
}
