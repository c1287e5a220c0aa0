# shellcheck shell=bash
# How the test bed runs its Kubernetes daemons: TCP ports on 127.0.0.1 that
# stay put across runs, a daemon started or reused by what it runs (its
# binary, its arguments and the files they name), and polls for health
# under a deadline.

# proc_alive PID: the process runs (a zombie child of this shell does not).
proc_alive() {
	local state
	state=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
	[[ -n $state && $state != Z ]]
}

# kube_port VAR OWNER DEFAULT: set VAR to OWNER's port for VAR: the one
# recorded in $RUN when OWNER still runs or the port is free, else the first
# free one from DEFAULT up.
kube_port() {
	local var=$1 owner=$2 port=$3 f=$RUN/kube-port.$1 prev="" i
	[[ -f $f ]] && prev=$(<"$f")
	if [[ $prev =~ ^[0-9]+$ ]] && { pid_of "$owner" "${KUBE_EXE[$owner]}" >/dev/null || ! port_busy "$prev"; }; then
		port=$prev
	else
		for ((i = 0; i < 100; i++)); do
			port_busy "$port" || break
			port=$((port + 1))
		done
		port_busy "$port" && die "no free port for $var from $3 up"
	fi
	echo "$port" >"$f"
	printf -v "$var" '%s' "$port"
}

# wait_healthy FN SECONDS [PID]: poll the function FN until it succeeds;
# fail after SECONDS, or as soon as PID no longer runs.
wait_healthy() {
	local fn=$1 end=$((SECONDS + $2)) pid=${3:-}
	until "$fn" >/dev/null 2>&1; do
		[[ -z $pid ]] || proc_alive "$pid" || return 1
		((SECONDS < end)) || return 1
		sleep 0.2
	done
}

# daemon_spec ARGS...: what a daemon runs: its arguments, then the sha256 of
# every regular file an argument names (--flag=/path or /path), logs aside.
daemon_spec() {
	local a v
	printf '%s\n' "$@"
	for a in "$@"; do
		v=${a#*=}
		[[ $v == /* && $v != *.log && -f $v ]] || continue
		printf '%s %s\n' "$v" "$(sha256sum <"$v" | cut -c1-64)"
	done
}

# kube_daemon NAME HEALTH WAIT WHERE ARGS...: make the daemon NAME
# (${KUBE_EXE[NAME]} ARGS...) run and be healthy, by the function HEALTH.
# One still running the same binary with the same spec is reused; one whose
# binary was rebuilt, spec changed or health fails is replaced. A started
# one has WAIT seconds to become healthy. Prints its report line with WHERE.
kube_daemon() {
	local name=$1 health=$2 wait=$3 where=$4 exe want pid restart=""
	shift 4
	exe=${KUBE_EXE[$name]}
	want=$(daemon_spec "$exe" "$@")
	if pid=$(pid_of "$name" "$exe"); then
		if [[ $(readlink "/proc/$pid/exe") == *" (deleted)" ]]; then
			restart="binary rebuilt"
		elif [[ ! -f $RUN/$name.spec || $(<"$RUN/$name.spec") != "$want" ]]; then
			restart="config changed"
		elif wait_healthy "$health" 15 "$pid"; then
			report "$name" reused "$where (pid $pid)"
			return 0
		else
			restart="not healthy"
		fi
		stop_daemon "$name" "$exe" >/dev/null
		restart="replaced pid $pid: $restart"
	fi
	start_daemon "$name" "$exe" "$@"
	pid=$(<"$RUN/$name.pid")
	printf '%s\n' "$want" >"$RUN/$name.spec"
	if ! wait_healthy "$health" "$wait" "$pid"; then
		logtail "$LOGS/$name.log"
		if proc_alive "$pid"; then
			die "$name (pid $pid) not healthy within $wait s (log: $LOGS/$name.log)"
		fi
		die "$name exited during start-up (log: $LOGS/$name.log)"
	fi
	report "$name" started "$where (pid $pid${restart:+, $restart})"
}

# kube_wait SECONDS WHAT FN: poll FN until it succeeds, or die saying WHAT
# did not happen.
kube_wait() {
	wait_healthy "$3" "$1" || die "$2 within $1 s (logs: $LOGS/kube*.log)"
}
