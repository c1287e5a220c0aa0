// Package testbed tells tests where the real services of the test bed are:
// the Docker engine, buildkitd, the local OCI registry, the local base image,
// a Node 22 toolchain for installing harness CLIs, and a single-node
// Kubernetes cluster running the agent-sandbox controller.
//
// `make testbed` (scripts/testbed up) starts or reuses those services and
// writes their coordinates to a state file through WriteState, run by the
// test bed's Go helper (cmd/testbedctl write-state), which also answers
// where the test bed lives (Dir) for the scripts: this package is the one
// place both are defined. `scripts/testbed up docker` (what `make run`
// uses) brings up all but Kubernetes, keeping the Kubernetes keys of an
// earlier full `up`.
// A test that needs a service calls Require, which fails the test (never
// skips it) when the test bed is not up, saying how to bring it up.
//
// The state file (testbed.env in Dir) holds KEY=VALUE lines: DOCKER_HOST,
// BUILDKIT_HOST, BOXCTL_TEST_REGISTRY, BOXCTL_TEST_BASE_IMAGE,
// BOXCTL_TEST_NODE_DIR, BOXCTL_NPM_CACHE, BOXCTL_TEST_KUBECONFIG,
// BOXCTL_TEST_KUBE_AUDIT_LOG and BOXCTL_TEST_KUBECTL are required;
// BOXCTL_TEST_NODE_VERSION, the tracing keys (BOXCTL_TEST_OTLP_ENDPOINT,
// BOXCTL_TEST_JAEGER_URL) and the browser (BOXCTL_TEST_CHROMIUM) are
// optional: RequireTracing and RequireChromium fail without them. Blank
// lines and # comments are ignored, and values may be quoted.
//
// The cluster is Kubernetes v1.35 with the agent-sandbox controller at the
// version go.mod requires (the agents.x-k8s.io and
// extensions.agents.x-k8s.io APIs at v1beta1; `up` replaces the v1alpha1
// CRDs of an older test bed), everything on 127.0.0.1. Its one node
// is "localhost"; pods pull images from the test bed's registry (Registry,
// BaseImage), sit on a private bridge with no route off the machine, and
// have no cluster DNS or kube-proxy: reach a pod through the API (exec,
// port-forward), not through a Service.
//
// The test bed's Go helper (cmd/testbedctl) configures itself with flags;
// a Go component of the test bed that grows a constructor takes an Options
// struct (functional options are for clients of outside APIs), never both.
package testbed
