package boximage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"
	bkclient "github.com/moby/buildkit/client"
	"github.com/moby/buildkit/exporter/containerimage/exptypes"

	"github.com/tangle-network/boxctl/internal/dockerclient"
)

// DockerExporter loads the image into a Docker engine under a tag: BuildKit
// streams a docker-format tarball straight into the engine's image load.
// A DockerExporter serves one Build.
type DockerExporter struct {
	docker *client.Client
	tag    string
	pr     *io.PipeReader
	pw     *io.PipeWriter
}

var (
	_ Exporter = (*DockerExporter)(nil)
	_ reuser   = (*DockerExporter)(nil)
)

// NewDockerExporter loads into docker under tag (repository:tag).
func NewDockerExporter(docker *client.Client, tag string) (*DockerExporter, error) {
	if docker == nil || tag == "" {
		return nil, errors.New("docker exporter: need a Docker client and a tag")
	}
	pr, pw := io.Pipe()
	return &DockerExporter{docker: docker, tag: tag, pr: pr, pw: pw}, nil
}

func (e *DockerExporter) entry() bkclient.ExportEntry {
	return bkclient.ExportEntry{
		Type:  bkclient.ExporterDocker,
		Attrs: map[string]string{"name": e.tag},
		// BuildKit closes the writer when the tarball is complete.
		Output: func(map[string]string) (io.WriteCloser, error) { return e.pw, nil },
	}
}

// run feeds the tarball to the engine. When the solve fails before
// writing, closing the pipe with its error ends the load.
func (e *DockerExporter) run(ctx context.Context, solved <-chan struct{}, solveErr *error) error {
	go func() {
		select {
		case <-solved:
			// A successful solve has written and closed the stream already;
			// a failed one may never have opened it.
			e.pw.CloseWithError(*solveErr)
		case <-ctx.Done():
			e.pw.CloseWithError(ctx.Err())
		}
	}()
	resp, err := e.docker.ImageLoad(ctx, e.pr, client.ImageLoadWithQuiet(true))
	if err != nil {
		e.pr.CloseWithError(err)
		return fmt.Errorf("docker load: %w", err)
	}
	defer resp.Body.Close()
	if err := readLoadStream(resp.Body); err != nil {
		return fmt.Errorf("docker load: %w", err)
	}
	return nil
}

// readLoadStream reads the engine's JSON message stream and returns the
// first error it reports.
func readLoadStream(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var m struct {
			Stream      string `json:"stream"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
			Error string `json:"error"`
		}
		if err := dec.Decode(&m); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if m.ErrorDetail != nil {
			return errors.New(m.ErrorDetail.Message)
		}
		if m.Error != "" {
			return errors.New(m.Error)
		}
	}
}

func (e *DockerExporter) result(ctx context.Context, resp *bkclient.SolveResponse, _ authLookup) (Result, error) {
	insp, err := e.docker.ImageInspect(ctx, e.tag)
	if err != nil {
		return Result{}, fmt.Errorf("inspect loaded image %s: %w", e.tag, err)
	}
	return Result{
		Reference: e.tag,
		Digest:    resp.ExporterResponse[exptypes.ExporterImageDigestKey],
		ImageID:   insp.ID,
		Size:      insp.Size,
	}, nil
}

// probe builds the image inside buildkitd only, with the Docker media types
// the docker exporter uses, so digests match an exported image's.
func (e *DockerExporter) probe() bkclient.ExportEntry {
	return bkclient.ExportEntry{Type: bkclient.ExporterImage, Attrs: map[string]string{"oci-mediatypes": "false"}}
}

// reuse tags the image if the engine already holds it (same config digest,
// which is the engine's image id), sparing the tarball of a no-change
// rebuild.
func (e *DockerExporter) reuse(ctx context.Context, resp *bkclient.SolveResponse) (Result, bool, error) {
	id := resp.ExporterResponse[exptypes.ExporterImageConfigDigestKey]
	if id == "" {
		return Result{}, false, nil
	}
	insp, err := e.docker.ImageInspect(ctx, id)
	switch {
	case cerrdefs.IsNotFound(err):
		return Result{}, false, nil
	case err != nil:
		return Result{}, false, fmt.Errorf("inspect image %s: %w", id, err)
	case insp.ID != id:
		return Result{}, false, nil
	}
	if err := e.docker.ImageTag(ctx, id, e.tag); err != nil {
		return Result{}, false, fmt.Errorf("tag image %s as %s: %w", id, e.tag, err)
	}
	e.pw.Close()
	return Result{
		Reference: e.tag,
		Digest:    resp.ExporterResponse[exptypes.ExporterImageDigestKey],
		ImageID:   insp.ID,
		Size:      insp.Size,
	}, true, nil
}

// LocalDigest returns the digest the Docker engine at host (default
// DOCKER_HOST) knows a local image by: its registry digest when it was
// pulled or pushed, else its id. The error says the engine does not know
// the image (or cannot be reached).
func LocalDigest(ctx context.Context, host, ref string) (string, error) {
	cli, err := dockerclient.New(host)
	if err != nil {
		return "", err
	}
	defer cli.Close()
	img, err := cli.ImageInspect(ctx, ref)
	if err != nil {
		return "", err
	}
	for _, rd := range img.RepoDigests {
		if _, d, ok := strings.Cut(rd, "@"); ok {
			return d, nil
		}
	}
	return img.ID, nil
}

// forEngine writes the image into the engine's store as BuildKit builds
// it: the engine building is this exporter's own (see connect).
func (e *DockerExporter) forEngine(eng *engine) (Exporter, error) {
	return &engineStore{e: eng, tag: e.tag}, nil
}
