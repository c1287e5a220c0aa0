package npmlock

import (
	"encoding/json"
	"testing"
)

func TestLock(t *testing.T) {
	tests := []struct {
		name     string
		packages map[string]json.RawMessage
		want     string
	}{
		{"no tree", nil, `{
  "name": "p",
  "version": "0.0.0",
  "lockfileVersion": 3,
  "requires": true,
  "packages": {
    "": {
      "name": "p",
      "version": "0.0.0",
      "dependencies": {
        "a": "1.0.0"
      }
    }
  }
}
`},
		{"a tree, sorted, its root replaced", map[string]json.RawMessage{
			"node_modules/a": json.RawMessage(`{"version":"1.0.0","integrity":"sha512-x<y>"}`),
			"":               json.RawMessage(`{"name":"stale"}`),
		}, `{
  "name": "p",
  "version": "0.0.0",
  "lockfileVersion": 3,
  "requires": true,
  "packages": {
    "": {
      "name": "p",
      "version": "0.0.0",
      "dependencies": {
        "a": "1.0.0"
      }
    },
    "node_modules/a": {
      "version": "1.0.0",
      "integrity": "sha512-x<y>"
    }
  }
}
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(tt.packages)
			got, err := Lock("p", map[string]string{"a": "1.0.0"}, tt.packages)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("Lock() =\n%s\nwant\n%s", got, tt.want)
			}
			if len(tt.packages) != before {
				t.Error("Lock changed the caller's packages")
			}
		})
	}
}
