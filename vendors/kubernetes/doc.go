// Package kubernetes is the Kubernetes vendor: a box is a Sandbox of
// kubernetes-sigs/agent-sandbox (agents.x-k8s.io/v1beta1), a singleton
// pod with a stable name, in one namespace of any cluster with the
// agent-sandbox controller installed. It speaks to the API server with
// client-go and the project's own published API types; the cluster is
// found as kubectl finds it (KUBECONFIG, ~/.kube/config, else the pod's
// service account), or given with WithRESTConfig.
//
// The vendor speaks APIVersion (v1beta1), which agent-sandbox v0.5 serves
// beside v1alpha1 and v1.0 alone. Before its first call on a group it asks
// the cluster's discovery whether the group is served at that version,
// and fails with an *APIVersionError naming the versions served when it is
// not (agent-sandbox before v0.5, or none installed): the two versions
// differ in kind (replicas against an operating mode, claims on templates
// against claims on warm pools, pools of pods against pools of
// Sandboxes), and a cluster on v1alpha1 upgrades agent-sandbox instead.
//
// # Boxes
//
// Create makes a Sandbox whose pod runs the box image as the image's
// (non-root) user, without privilege escalation, with every capability
// dropped, the runtime's default seccomp profile, no service account
// token and no service links, under the CPU, memory and ephemeral-storage
// limits asked for (requests stay small, WithRequests, so idle boxes pack
// onto a node), optionally under a RuntimeClass (CreateSpec.Runtime, e.g.
// gVisor), with no Service (boxes are reached through the API server).
// The Sandbox's shutdownTime is the box's deadline, with the
// Delete policy: the cluster itself removes the box when the caller is
// gone, and the image's init ends it too. Create returns once the
// Sandbox is Ready, or fails with a *NotReadyError carrying the
// controller's or the kubelet's reason (an image pull error, an
// unschedulable pod, a pod that finished) and removes what it made.
//
// Every label of a box is in the annotation LabelsAnnotation; the labels
// that Kubernetes can hold (an owner's colons it cannot) are labels too,
// which List selects by.
//
// With WithWarmPool, Create claims a box through a SandboxClaim on that
// SandboxWarmPool: the controller adopts an idle Sandbox of the pool
// (named after the pool; the box's id is its name) when there is one, and
// makes one from the pool's SandboxTemplate (EnsurePool makes both, of
// one name) when there is none. A spec that asks for more than the
// template gives (an environment, resources, a runtime) or another image
// gets a Sandbox of its own. A pool replaces its idle boxes when its
// template changes, and a claim never adopts a box of the old template.
// The controller replaces an idle box that is not ready within its
// --sandbox-warm-pool-readiness-grace-period (5 minutes by default):
// raise it for images that start slower than that.
//
// A standby pool (PoolSpec.Standby) is one whose pods run the standby
// bridge (box-bridge --standby) from their start and are ready once it
// answers /health: no process is started in a box at its claim.
// ClaimStandby (vendors.StandbyPooler) claims one for a harness and
// returns it with the pool's token, which the caller hands the bridge its
// secrets with (POST /v1/claim); the token is in the pool's Secret
// (StandbySecret) only, copied by an init container to a memory volume
// the bridge reads it from and removes, never in a pod spec or an env
// var. Create claims only from a plain pool.
//
// # Suspend, resume and fork
//
// A box made with a retention (CreateSpec.Retention) is suspendable
// (vendors.Suspender): its Sandbox has a volume claim (DiskVolume, of the
// class WithStorageClass names) that holds KeptPaths, the image user's
// home and the workspace, seeded from the image by an init container at
// the first start. Suspend sets the operating mode to Suspended (the pod
// goes, the claim stays); Resume sets it to Running with what is left of
// the active budget as the box's deadline. The lifetimes are the Sandbox's LifetimeAnnotation,
// and shutdownTime follows them, so the cluster removes a box past its
// active deadline or its retention, its volume with it. Fork makes
// suspended Sandboxes whose claims clone the source's (dataSource), bound
// before it returns.
//
// # Processes and files
//
// Exec, Spawn, Read and Write run through the pod's exec subresource
// (WebSocket, or SPDY on older servers). The exec API takes no
// environment, and a command line is in the request and so in the API
// server's audit log: environment variables travel on the command's
// stdin, never on a command line or in the pod spec. Spawn, Read and
// Write are the process layer's (vendors/boxproc) over that exec: a
// spawned process runs under a supervisor that detaches from the exec and
// records its pid, output and exit status in the box, so it outlives the
// caller. Read and Write move tar streams, as kubectl cp does.
//
// Endpoint is a port-forward through the API server on a local
// 127.0.0.1 port, owned by the vendor until Destroy or Close; a
// connection the pod refuses ends that connection only.
package kubernetes
