// Package dockerclient is the one place boxctl constructs a Docker Engine
// API client: the image publisher (boximage), the Docker vendor and the
// tests all connect through New, so every client negotiates the API
// version and honours the same environment (DOCKER_HOST,
// DOCKER_API_VERSION, DOCKER_CERT_PATH, DOCKER_TLS_VERIFY).
//
// A test in this package fails when any other package calls
// client.NewClientWithOpts itself.
package dockerclient
