// Command testbedctl holds the steps of scripts/testbed that need Go
// rather than a shell tool: where the test bed lives, the state file,
// the Kubernetes PKI and the files rendered from it, address arithmetic,
// and the image steps. The script keeps what a shell does well
// (installing packages, starting daemons, pid files).
//
//	testbedctl dir
//	    prints the test bed's state directory (internal/testbed.Dir).
//	testbedctl write-state -file DIR/testbed.env KEY=VALUE...
//	    writes the state file internal/testbed reads, keeping the keys of
//	    the previous file that the arguments do not set.
//	testbedctl kube-pki -dir PKI -service-cidr CIDR [-node localhost]
//	    makes the cluster's CA, serving and client certificates (P-256) and
//	    service account key pair (RSA), unless PKI holds a matching set.
//	testbedctl kubeconfig -pki PKI -server URL -user NAME -out FILE
//	    writes the kubeconfig of the client NAME, only when it changes.
//	testbedctl cni-conf -dir DIR -network NAME -bridge BR -subnet CIDR -ipam-dir DIR
//	    writes the pods' CNI configuration, only when it changes.
//	testbedctl pod-subnet-check -subnet CIDR -bridge BR < `ip -4 route show`
//	    fails when a route other than the pods' own covers the pod subnet.
//	testbedctl push-base -layer ROOTFS.tar.gz -repo HOST:PORT/boxctl/base -tag T [-tag T2] [-label k=v]
//	    builds the base image around the rootfs tarball, pushes it under every
//	    tag and prints REPO@sha256:DIGEST on stdout.
//	testbedctl save-image -layer LAYER.tar -ref NAME:TAG -out IMAGE.tar [-entrypoint ARG]...
//	    writes an image of that one layer as a `docker save` archive tagged
//	    NAME:TAG, for `ctr images import` (the Kubernetes pause image).
//	testbedctl wait-buildkit -addr unix:///path/buildkitd.sock [-timeout 60s]
//	    waits until buildkitd answers with at least one worker.
package main
