package boximage_test

import (
	"bytes"
	"testing"

	"github.com/tangle-network/boxctl/boximage"
)

func TestRecord_WriteText(t *testing.T) {
	tests := []struct {
		name string
		rec  boximage.Record
		want string
	}{
		{
			name: "docker: the reference is the image",
			rec: boximage.Record{Target: boximage.TargetDocker, Image: "boxctl/box:dev", Reference: "boxctl/box:dev",
				Digest: "sha256:ab", Size: 1536, BuildSeconds: 12.34},
			want: "target   docker\nimage    boxctl/box:dev\ndigest   sha256:ab\nsize     1.536kB (1536 bytes)\ntook     12.3s\n",
		},
		{
			name: "e2b: the template",
			rec: boximage.Record{Target: boximage.TargetE2B, Image: "r/box@sha256:ab", Reference: "tpl-1",
				Digest: "sha256:ab", Size: 2_000_000, BuildSeconds: 1},
			want: "target   e2b\nimage    r/box@sha256:ab\ndigest   sha256:ab\nsize     2MB (2000000 bytes)\ntemplate tpl-1\ntook     1.0s\n",
		},
		{
			name: "daytona: the snapshot",
			rec:  boximage.Record{Target: boximage.TargetDaytona, Image: "r/box@sha256:ab", Reference: "snap", Digest: "sha256:ab"},
			want: "target   daytona\nimage    r/box@sha256:ab\ndigest   sha256:ab\nsize     0B (0 bytes)\nsnapshot snap\ntook     0.0s\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := tt.rec.WriteText(&buf); err != nil {
				t.Fatal(err)
			}
			if buf.String() != tt.want {
				t.Errorf("WriteText wrote\n%q\nwant\n%q", buf.String(), tt.want)
			}
		})
	}
}
