package dockerclient

import (
	"fmt"

	"github.com/docker/docker/client"
)

// New connects to the Docker engine at host (unix:///var/run/docker.sock,
// tcp://HOST:PORT, ...), or as the environment says when host is empty:
// DOCKER_HOST, DOCKER_API_VERSION, DOCKER_CERT_PATH and DOCKER_TLS_VERIFY,
// the engine's default socket without them. A host given replaces
// DOCKER_HOST only; TLS settings still come from the environment.
//
// The client negotiates the API version with the engine on its first call
// (Debian's engine speaks 1.41), unless DOCKER_API_VERSION pins one. New is
// the only constructor of Docker clients in boxctl. The caller closes the
// client.
func New(host string) (*client.Client, error) {
	opts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if host != "" {
		opts = append(opts, client.WithHost(host))
	}
	c, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	return c, nil
}
