package sandbox_test

// The sandbox flow runs on Kubernetes too: the Kubernetes vendor on the
// test bed's cluster, the box image pulled from the test bed's registry,
// the bridge reached through a port-forward, and the fixture's model
// endpoint reached from the pods through this machine's address.
