# shellcheck shell=bash
# Shared helpers of scripts/testbed: directories, locking, pid files,
# packages, the Go helper and the state file.

# dockerd, runc and debootstrap live in sbin, which a PATH may lack.
case ":$PATH:" in *:/usr/sbin:*) ;; *) PATH=$PATH:/usr/sbin:/sbin ;; esac

command -v go >/dev/null || {
	echo "testbed: go is not on PATH (the test bed's helper and daemons are built from this module)" >&2
	exit 1
}
# TB is the state directory, as internal/testbed.Dir() computes it.
TB=$(cd "$ROOT" && go run ./internal/testbed/cmd/testbedctl dir) || {
	echo "testbed: go run ./internal/testbed/cmd/testbedctl dir failed" >&2
	exit 1
}
RUN=$TB/run     # pid files and sockets
LOGS=$TB/log    # service and step logs
BIN=$TB/bin     # binaries built from this module
CACHE=$TB/cache # downloads and the base rootfs tarball
STATE_FILE=$TB/testbed.env

# Packages the test bed needs, by the command that proves each is there (a
# name on PATH, or an absolute path for what lives off PATH): those of the
# Docker job's services (PKG_OF_DOCKER), and those the rest adds
# (PKG_OF_KUBE: Kubernetes, the bubblewrap jail's tests).
# shellcheck disable=SC2034 # read through pkg_pairs's nameref
declare -A PKG_OF_DOCKER=(
	[dockerd]=docker.io [docker]=docker.io [runc]=runc
	[docker-registry]=docker-registry [debootstrap]=debootstrap [curl]=curl
)
# shellcheck disable=SC2034 # read through pkg_pairs's nameref
declare -A PKG_OF_KUBE=(
	[containerd]=containerd [bwrap]=bubblewrap [ctr]=containerd [etcd]=etcd-server
	[ip]=iproute2 [/usr/lib/cni/bridge]=containernetworking-plugins
	[/usr/lib/cni/host-local]=containernetworking-plugins
	[/usr/lib/cni/loopback]=containernetworking-plugins
	[/usr/lib/cni/tuning]=containernetworking-plugins [ipset]=ipset
)

init_dirs() {
	mkdir -p "$RUN" "$LOGS" "$BIN" "$CACHE"
}

die() {
	echo "testbed: $*" >&2
	exit 1
}

# report SERVICE STATUS WHERE: the one line `up` prints per service.
report() {
	printf '%-9s %-9s %s\n' "$1" "$2" "$3"
}

# logtail FILE: the end of a log, for error messages.
logtail() {
	[[ -f $1 ]] && tail -n 20 "$1" | sed 's/^/    /' >&2
	return 0
}

need_root() {
	[[ $(id -u) -eq 0 ]] || die "must run as root (it installs packages and starts dockerd)"
}

take_lock() {
	exec 9>"$RUN/testbed.lock"
	if ! flock -n 9; then
		echo "testbed: waiting for another scripts/testbed run to finish" >&2
		flock 9
	fi
}

# ensure_packages CMD=PKG...: install the Debian packages whose commands
# are missing; it runs apt-get update only when the package lists are
# absent or the install fails on stale lists.
ensure_packages() {
	local a c missing=()
	for a in "$@"; do
		c=${a%%=*}
		if [[ $c == /* ]]; then
			[[ -x $c ]] || missing+=("${a#*=}")
		else
			command -v "$c" >/dev/null 2>&1 || missing+=("${a#*=}")
		fi
	done
	[[ ${#missing[@]} -eq 0 ]] && return 0
	mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
	local log=$LOGS/apt.log
	echo "testbed: installing ${missing[*]} (log: $log)" >&2
	export DEBIAN_FRONTEND=noninteractive
	local install=(apt-get install -y -q --no-install-recommends "${missing[@]}")
	if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then
		apt-get update -q >>"$log" 2>&1 || { logtail "$log"; die "apt-get update failed"; }
	fi
	if ! "${install[@]}" >>"$log" 2>&1; then
		apt-get update -q >>"$log" 2>&1 || { logtail "$log"; die "apt-get update failed"; }
		"${install[@]}" >>"$log" 2>&1 || { logtail "$log"; die "apt-get install ${missing[*]} failed"; }
	fi
	hash -r
}

# pkg_pairs ARRAY: the CMD=PKG pairs of an associative array of PKG_OF_*.
pkg_pairs() {
	local -n of=$1
	local c
	for c in "${!of[@]}"; do
		printf '%s=%s\n' "$c" "${of[$c]}"
	done
}

# pid_of NAME EXE: print the pid recorded in $RUN/NAME.pid when that process
# is alive and runs the binary EXE; fail otherwise (no pid file, dead, or a
# recycled pid now running something else).
pid_of() {
	local f=$RUN/$1.pid pid exe
	[[ -f $f ]] || return 1
	pid=$(<"$f")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
	exe=${exe% (deleted)}
	[[ $exe == "$2" ]] || return 1
	echo "$pid"
}

# drop_stale_pidfile FILE NAME: remove a daemon's own pid file unless the
# pid it names is alive and runs a binary called NAME.
drop_stale_pidfile() {
	local f=$1 pid exe
	[[ -f $f ]] || return 0
	pid=$(<"$f")
	if [[ $pid =~ ^[0-9]+$ ]] && exe=$(readlink "/proc/$pid/exe" 2>/dev/null); then
		exe=${exe% (deleted)}
		[[ ${exe##*/} == "$2" ]] && return 0
	fi
	rm -f "$f"
	echo "testbed: removed stale pid file $f (pid ${pid:-none} is not a running $2)" >&2
}

# start_daemon NAME CMD...: start CMD detached from this shell's session,
# its output in $LOGS/NAME.log, its pid in $RUN/NAME.pid.
start_daemon() {
	local name=$1
	shift
	echo "=== $(date -u +%FT%TZ) starting: $*" >>"$LOGS/$name.log"
	setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null 9>&- &
	echo $! >"$RUN/$name.pid"
}

# stop_daemon NAME EXE: stop the process recorded in NAME's pid file if it
# still runs EXE (TERM, then KILL after 30 s); print its line.
stop_daemon() {
	local name=$1 exe=$2 pid i
	if ! pid=$(pid_of "$name" "$exe"); then
		rm -f "$RUN/$name.pid"
		report "$name" "untouched" "not started by the test bed"
		return 0
	fi
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 300; i++)); do
		[[ -e /proc/$pid ]] || break
		sleep 0.1
	done
	if [[ -e /proc/$pid ]]; then
		kill -KILL "$pid" 2>/dev/null || true
		sleep 0.2
	fi
	rm -f "$RUN/$name.pid"
	report "$name" "stopped" "pid $pid"
}

# alive_or_die NAME PID: fail with the log tail when a daemon died while
# the test bed waited for it.
alive_or_die() {
	if [[ ! -e /proc/$2 ]]; then
		logtail "$LOGS/$1.log"
		die "$1 exited during start-up (log: $LOGS/$1.log)"
	fi
}

# sha_of FILE...: one sha256 over the files' names and contents.
sha_of() {
	local f
	for f in "$@"; do
		printf '%s\n' "${f#"$ROOT"/}"
		cat "$f"
	done | sha256sum | cut -c1-64
}

# gomod_version MODULE: the version go.mod requires.
gomod_version() {
	awk -v m="$1" '$1 == m && $2 ~ /^v/ { print $2; exit }' "$ROOT/go.mod"
}

# go_tool NAME PKG STAMP [MODDIR [ENV...]]: build PKG (in the module at
# MODDIR, default this one, with the ENV assignments) into $BIN/NAME unless
# $BIN/NAME.stamp already holds STAMP.
go_tool() {
	local name=$1 pkg=$2 stamp=$3 out=$BIN/$1 dir=${4:-$ROOT}
	local env=("${@:5}")
	if [[ -x $out && -f $out.stamp && $(<"$out.stamp") == "$stamp" ]]; then
		return 0
	fi
	local log=$LOGS/go-build-$name.log
	if ! (cd "$dir" && env "${env[@]}" go build -o "$out.new" "$pkg") >"$log" 2>&1; then
		logtail "$log"
		die "go build $pkg failed (log: $log)"
	fi
	mv -f "$out.new" "$out"
	printf '%s\n' "$stamp" >"$out.stamp"
}

# testbedctl ARGS...: run the Go helper, building it first when its sources
# or the modules it links changed.
testbedctl() {
	local srcs stamp
	mapfile -t srcs < <(find "$ROOT/internal/testbed" \( -path "$ROOT/internal/testbed/cmd/pause" -prune \) -o \
		-name '*.go' ! -name '*_test.go' -print | sort)
	stamp="$(sha_of "${srcs[@]}") $(gomod_version github.com/moby/buildkit) $(gomod_version github.com/google/go-containerregistry)"
	go_tool testbedctl ./internal/testbed/cmd/testbedctl "$stamp"
	"$BIN/testbedctl" "$@"
}

# write_state [full]: the state file, through the Go helper that owns its
# keys; with full, the standalone buildkitd's, the OTLP receiver's, the
# browser's and Kubernetes keys too (an `up` of the Docker part keeps those
# of an earlier full `up`).
write_state() {
	local kv=(
		"DOCKER_HOST=$DOCKER_HOST_ADDR"
		"BOXCTL_TEST_REGISTRY=$REGISTRY"
		"BOXCTL_TEST_BASE_IMAGE=$BASE_IMAGE"
		"BOXCTL_TEST_NODE_DIR=$NODE_DIR"
		"BOXCTL_TEST_NODE_VERSION=v$NODE_VERSION"
		"BOXCTL_NPM_CACHE=$NPM_CACHE"
	)
	if [[ ${1:-} == full ]]; then
		kv+=(
			"BUILDKIT_HOST=$BUILDKIT_ADDR"
			"BOXCTL_TEST_OTLP_ENDPOINT=$OTLP_ENDPOINT"
			"BOXCTL_TEST_JAEGER_URL=$JAEGER_URL"
			"BOXCTL_TEST_CHROMIUM=$CHROMIUM"
			"BOXCTL_TEST_KUBECONFIG=$ADMIN_KUBECONFIG"
			"BOXCTL_TEST_KUBE_AUDIT_LOG=$KUBE_AUDIT_LOG"
			"BOXCTL_TEST_KUBECTL=$KUBECTL"
			"BOXCTL_TEST_KUBE_STORAGE_CLASS=$KUBE_STORAGE_CLASS"
			"BOXCTL_TEST_KUBE_RELAY_NET=$KUBE_RELAY_NET"
			"BOXCTL_TEST_GVISOR_RUNTIME=$RUNSC_RUNTIME"
		)
	fi
	testbedctl write-state -file "$STATE_FILE" "${kv[@]}"
}
