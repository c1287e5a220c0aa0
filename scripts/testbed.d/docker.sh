# shellcheck shell=bash
# The Docker engine: reuse one that answers, else start Debian's dockerd
# with its data in the state directory and a daemon config of the test
# bed's (the extra runtimes: gvisor.sh's runsc; its build cache bounded to
# 10 GB). An engine the test bed started with other flags is restarted; a
# changed config is reloaded.

DOCKERD_EXE=/usr/sbin/dockerd
DOCKER_SOCK=/var/run/docker.sock
DOCKERD_CONFIG=$TB/dockerd.json

# docker_answers HOST: the engine at HOST answers `docker info`.
docker_answers() {
	DOCKER_HOST=$1 timeout 10 docker info --format '{{.ServerVersion}}' >/dev/null 2>&1
}

# docker_config: write the daemon config; print "changed" when it did.
docker_config() {
	local want
	want=$(printf '{\n  "runtimes": {\n    "%s": {"path": "%s", "runtimeArgs": ["--overlay2=none"]}\n  },\n  "builder": {"gc": {"enabled": true, "defaultKeepStorage": "10GB"}}\n}' "$RUNSC_RUNTIME" "$RUNSC_EXE")
	if [[ ! -f $DOCKERD_CONFIG || $(<"$DOCKERD_CONFIG") != "$want" ]]; then
		printf '%s\n' "$want" >"$DOCKERD_CONFIG"
		echo changed
	fi
}

docker_up() {
	local h pid i changed args
	changed=$(docker_config)
	DOCKER_HOST_ADDR=unix://$DOCKER_SOCK
	args=(--host "$DOCKER_HOST_ADDR" --data-root "$TB/docker" --pidfile "$RUN/dockerd.self.pid" --config-file "$DOCKERD_CONFIG")
	if pid=$(pid_of dockerd "$DOCKERD_EXE"); then
		if [[ $(tr '\0' ' ' <"/proc/$pid/cmdline") != "$DOCKERD_EXE ${args[*]} " ]]; then
			stop_daemon dockerd "$DOCKERD_EXE" >/dev/null
			report docker restarting "pid $pid ran with other flags"
		elif [[ -n $changed ]]; then
			kill -HUP "$pid"
			report docker reloaded "$DOCKERD_CONFIG (pid $pid)"
		fi
	fi
	for h in ${DOCKER_HOST:-} "unix://$DOCKER_SOCK"; do
		if docker_answers "$h"; then
			DOCKER_HOST_ADDR=$h
			report docker reused "$h"
			return 0
		fi
	done
	DOCKER_HOST_ADDR=unix://$DOCKER_SOCK
	if ! pid=$(pid_of dockerd "$DOCKERD_EXE"); then
		mkdir -p "$TB/docker"
		# No engine answers and none of ours runs: pid files left by one
		# that died (or a machine restored from a snapshot) may name a pid
		# some other process now holds, and dockerd refuses to start, or
		# waits on a containerd that is not there, when they do.
		drop_stale_pidfile "$RUN/dockerd.self.pid" dockerd
		drop_stale_pidfile /var/run/docker/containerd/containerd.pid containerd
		start_daemon dockerd "$DOCKERD_EXE" "${args[@]}"
		pid=$(<"$RUN/dockerd.pid")
	fi
	for ((i = 0; i < 120; i++)); do
		if docker_answers "$DOCKER_HOST_ADDR"; then
			report docker started "$DOCKER_HOST_ADDR (pid $pid, data $TB/docker)"
			return 0
		fi
		alive_or_die dockerd "$pid"
		sleep 0.5
	done
	logtail "$LOGS/dockerd.log"
	die "dockerd did not answer on $DOCKER_HOST_ADDR within 60 s (log: $LOGS/dockerd.log)"
}

docker_down() {
	stop_daemon dockerd "$DOCKERD_EXE"
}
