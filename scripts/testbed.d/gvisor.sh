# shellcheck shell=bash
# gVisor: runsc built from the gvisor.dev/gvisor module (its go branch,
# which builds with the go tool alone, no cgo), registered with the test
# bed's engine as the runtime "runsc" through the daemon config docker.sh
# writes, with --overlay2=none: a box's files go to the container's layer,
# which a suspend (a stop) keeps, not to runsc's own overlay, which it
# discards. KVM is not needed: runsc's default platform, systrap, runs on a
# plain VM.

GVISOR_VERSION=v0.0.0-20260905035102-160fafc42237
RUNSC_EXE=$BIN/runsc
RUNSC_RUNTIME=runsc

gvisor_up() {
	local dir runtimes
	dir=$(module_dir "gvisor.dev/gvisor@$GVISOR_VERSION")
	go_tool runsc ./runsc "$GVISOR_VERSION version-stamped" "$dir" CGO_ENABLED=0 GOWORK=off "GOFLAGS=-trimpath -ldflags=-X=gvisor.dev/gvisor/runsc/version.version=$GVISOR_VERSION"
	runtimes=$(DOCKER_HOST=$DOCKER_HOST_ADDR docker info --format '{{range $k, $v := .Runtimes}}{{$k}}={{$v.Path}} {{end}}')
	if [[ " $runtimes" != *" $RUNSC_RUNTIME=$RUNSC_EXE "* ]]; then
		die "the engine at $DOCKER_HOST_ADDR has no runtime $RUNSC_RUNTIME=$RUNSC_EXE (it has: $runtimes):" \
			"add \"runtimes\": {\"$RUNSC_RUNTIME\": {\"path\": \"$RUNSC_EXE\"}} to its daemon.json and send it SIGHUP," \
			"or stop it so that the test bed starts its own"
	fi
	report gvisor ready "runtime $RUNSC_RUNTIME ($("$RUNSC_EXE" --version 2>/dev/null | head -n 1))"
}
