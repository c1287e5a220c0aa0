// Command testbedctl holds the steps of scripts/testbed that need a Go
// library rather than a shell tool:
//
//	testbedctl push-base -layer ROOTFS.tar.gz -repo HOST:PORT/boxctl/base -tag T [-tag T2] [-label k=v]
//	    builds the base image around the rootfs tarball, pushes it under every
//	    tag and prints REPO@sha256:DIGEST on stdout.
//	testbedctl save-image -layer LAYER.tar -ref NAME:TAG -out IMAGE.tar [-entrypoint ARG]...
//	    writes an image of that one layer as a `docker save` archive tagged
//	    NAME:TAG, for `ctr images import` (the Kubernetes pause image).
//	testbedctl wait-buildkit -addr unix:///path/buildkitd.sock [-timeout 60s]
//	    waits until buildkitd answers with at least one worker.
package main
