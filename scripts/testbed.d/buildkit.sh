# shellcheck shell=bash
# buildkitd: built from the buildkit module go.mod requires, OCI worker
# (runc), containerd worker off, on a unix socket in the state directory,
# with the local registry marked plain HTTP so builds push to and pull from it,
# and its cache bounded (12 GB at most, 10 GB of the disk left free).

BUILDKITD_EXE=$BIN/buildkitd

buildkit_up() {
	local sock=$RUN/buildkitd.sock version conf=$TB/buildkitd.toml pid restart=""
	BUILDKIT_ADDR=unix://$sock
	version=$(gomod_version github.com/moby/buildkit)
	[[ -n $version ]] || die "go.mod does not require github.com/moby/buildkit"
	go_tool buildkitd github.com/moby/buildkit/cmd/buildkitd "$version"

	local want
	want=$(
		cat <<-TOML
			# written by scripts/testbed
			root = "$TB/buildkit"
			[grpc]
			  address = ["$BUILDKIT_ADDR"]
			[worker.oci]
			  enabled = true
			  binary = "runc"
			  gc = true
			  reservedSpace = "2GB"
			  maxUsedSpace = "12GB"
			  minFreeSpace = "10GB"
			[worker.containerd]
			  enabled = false
			[registry."$REGISTRY"]
			  http = true
			  insecure = true
		TOML
	)
	if [[ ! -f $conf || $(<"$conf") != "$want" ]]; then
		printf '%s\n' "$want" >"$conf"
		restart="config changed"
	fi

	if pid=$(pid_of buildkitd "$BUILDKITD_EXE"); then
		if [[ $(readlink "/proc/$pid/exe") == *" (deleted)" ]]; then
			restart="binary rebuilt"
		fi
		if [[ -z $restart ]] && testbedctl wait-buildkit -addr "$BUILDKIT_ADDR" -timeout 30s 2>/dev/null; then
			report buildkitd reused "$BUILDKIT_ADDR"
			return 0
		fi
		stop_daemon buildkitd "$BUILDKITD_EXE" >/dev/null
		restart="replaced pid $pid: ${restart:-not answering}"
	elif [[ -z $restart && -S $sock ]] && testbedctl wait-buildkit -addr "$BUILDKIT_ADDR" -timeout 3s 2>/dev/null; then
		# Answering, with this config, but started outside this state's pid file.
		report buildkitd reused "$BUILDKIT_ADDR"
		return 0
	else
		restart=""
	fi
	rm -f "$sock"
	mkdir -p "$TB/buildkit"
	start_daemon buildkitd "$BUILDKITD_EXE" --config "$conf"
	pid=$(<"$RUN/buildkitd.pid")
	if ! testbedctl wait-buildkit -addr "$BUILDKIT_ADDR" -timeout 60s 2>>"$LOGS/buildkitd.log"; then
		alive_or_die buildkitd "$pid"
		logtail "$LOGS/buildkitd.log"
		die "buildkitd did not answer on $BUILDKIT_ADDR within 60 s (log: $LOGS/buildkitd.log)"
	fi
	report buildkitd started "$BUILDKIT_ADDR (pid $pid${restart:+, $restart})"
}

buildkit_down() {
	stop_daemon buildkitd "$BUILDKITD_EXE"
}
