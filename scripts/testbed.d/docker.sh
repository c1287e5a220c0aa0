# shellcheck shell=bash
# The Docker engine: reuse one that answers, else start Debian's dockerd
# with its data in the state directory.

DOCKERD_EXE=/usr/sbin/dockerd
DOCKER_SOCK=/var/run/docker.sock

# docker_answers HOST: the engine at HOST answers `docker info`.
docker_answers() {
	DOCKER_HOST=$1 timeout 10 docker info --format '{{.ServerVersion}}' >/dev/null 2>&1
}

docker_up() {
	local h pid i
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
		start_daemon dockerd "$DOCKERD_EXE" \
			--host "$DOCKER_HOST_ADDR" \
			--data-root "$TB/docker" \
			--pidfile "$RUN/dockerd.self.pid"
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
