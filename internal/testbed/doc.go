// Package testbed tells tests where the real services of the test bed are:
// the Docker engine, buildkitd, the local OCI registry, the local base image
// and a Node 22 toolchain for installing harness CLIs.
//
// `make testbed` (scripts/testbed up) starts or reuses those services and
// writes their coordinates to a state file; this package only reads it.
// A test that needs a service calls Require, which fails the test (never
// skips it) when the test bed is not up, saying how to bring it up.
//
// The state file (testbed.env in Dir) holds KEY=VALUE lines: DOCKER_HOST,
// BUILDKIT_HOST, BOXCTL_TEST_REGISTRY, BOXCTL_TEST_BASE_IMAGE,
// BOXCTL_TEST_NODE_DIR and BOXCTL_NPM_CACHE are required;
// BOXCTL_TEST_NODE_VERSION is optional. Blank lines and # comments are
// ignored, and values may be quoted.
package testbed
