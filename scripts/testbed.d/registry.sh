# shellcheck shell=bash
# The local OCI registry: Debian's docker-registry on 127.0.0.1, plain HTTP,
# storage in the state directory. Port 5000 unless something that is not a
# registry holds it.

REGISTRY_EXE=/usr/bin/docker-registry
REGISTRY_PORTS=(5000 5001 5002 5003 5004 5005)

# registry_answers HOST:PORT: GET /v2/ answers 200 from a registry.
registry_answers() {
	curl -fsS -m 5 -o /dev/null -D - "http://$1/v2/" 2>/dev/null |
		grep -qi '^docker-distribution-api-version: *registry/2'
}

# port_busy PORT: something listens on 127.0.0.1:PORT.
port_busy() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

registry_up() {
	local port prev="" pid i
	if [[ -f $RUN/registry.port ]]; then
		prev=$(<"$RUN/registry.port")
	fi
	for port in $prev "${REGISTRY_PORTS[@]}"; do
		if registry_answers "127.0.0.1:$port"; then
			REGISTRY=127.0.0.1:$port
			report registry reused "http://$REGISTRY"
			return 0
		fi
		port_busy "$port" || break
		port=""
	done
	[[ -n $port ]] || die "no free port for the registry among ${REGISTRY_PORTS[*]}"
	REGISTRY=127.0.0.1:$port
	mkdir -p "$TB/registry/data"
	cat >"$TB/registry/config.yml" <<-CONFIG
		version: 0.1
		log:
		  level: warn
		  accesslog:
		    disabled: true
		storage:
		  filesystem:
		    rootdirectory: $TB/registry/data
		  delete:
		    enabled: true
		http:
		  addr: $REGISTRY
		  headers:
		    X-Content-Type-Options: [nosniff]
	CONFIG
	if pid=$(pid_of registry "$REGISTRY_EXE"); then
		# Ours, but not answering where it should: replace it.
		stop_daemon registry "$REGISTRY_EXE" >/dev/null
	fi
	start_daemon registry "$REGISTRY_EXE" serve "$TB/registry/config.yml"
	pid=$(<"$RUN/registry.pid")
	echo "$port" >"$RUN/registry.port"
	for ((i = 0; i < 100; i++)); do
		if registry_answers "$REGISTRY"; then
			report registry started "http://$REGISTRY (pid $pid, storage $TB/registry/data)"
			return 0
		fi
		alive_or_die registry "$pid"
		sleep 0.2
	done
	die "registry did not answer on $REGISTRY within 20 s (log: $LOGS/registry.log)"
}

registry_down() {
	stop_daemon registry "$REGISTRY_EXE"
}
