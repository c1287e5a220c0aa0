// Package docker is the Docker Engine vendor, boxctl's embedded default: a
// box is a container on the local (or DOCKER_HOST) engine, driven through
// the Engine API with the official Go client, never the docker binary.
//
// # Boxes
//
// Every box is hardened by default: it runs as the image's (non-root)
// user with no-new-privileges and every capability dropped, under a pids
// limit and the CPU and memory limits asked for (defaults: DefaultCPUs,
// DefaultMemory, DefaultPids), optionally under another OCI runtime (for
// example gVisor's runsc). Boxes share one Docker bridge network of
// boxctl's own (DefaultNetwork) on which containers cannot reach each
// other (inter-container traffic is off); the host reaches a box only
// through the ports it exposes, published on 127.0.0.1 on ephemeral host
// ports.
//
// The lifetime is enforced inside the box: the vendor sets BOX_DEADLINE,
// the image's init ends every process in the box at that time, and the
// container is created with auto-remove, so the engine removes it when its
// init ends. A caller that crashed cannot leak a box past its deadline.
//
// # Processes
//
// Exec and Spawn run through the exec API. Environment variables given to
// them travel in the exec's create request only: the container's inspect
// data does not show them, nor does the exec's inspect data. A spawned
// process runs detached from the caller under a small shell supervisor
// that records its pid, its output and its exit status in the box under
// ProcDir, so it outlives the caller's connection and `boxctl logs` can
// read its output later.
//
// Read and Write use the archive API.
package docker
