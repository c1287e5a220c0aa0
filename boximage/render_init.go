package boximage

// initScript is box-init, the image's entrypoint under tini. It runs its
// arguments (by default `sleep infinity`, which keeps the box up for
// processes the bridge spawns) under timeout(1), so that the box ends at its
// deadline whatever runs in it: at the deadline timeout sends SIGTERM to the
// whole process group, then SIGKILL after BOX_KILL_GRACE seconds; timeout
// exits, tini (PID 1) exits with it, and the container, with every process
// left in its PID namespace, is gone.
//
// The deadline comes from the environment, first match wins:
//
//	BOX_DEADLINE   absolute end, in Unix seconds (set by the vendor at create)
//	BOX_LIFETIME   seconds from start (the image sets a default)
//
// A deadline already past exits at once with status 124, as timeout does.
const initScript = `#!/bin/sh
# box-init: run the box's main process until the box's deadline.
# BOX_DEADLINE (Unix seconds) or BOX_LIFETIME (seconds from now) bound it;
# BOX_KILL_GRACE (seconds, default 10) separates SIGTERM from SIGKILL.
set -eu

is_count() {
	case $1 in
	'' | *[!0-9]*) return 1 ;;
	esac
}

now=$(date +%s)
if [ -n "${BOX_DEADLINE:-}" ]; then
	is_count "$BOX_DEADLINE" || { echo "box-init: BOX_DEADLINE=$BOX_DEADLINE is not Unix seconds" >&2; exit 2; }
	left=$((BOX_DEADLINE - now))
elif [ -n "${BOX_LIFETIME:-}" ]; then
	is_count "$BOX_LIFETIME" || { echo "box-init: BOX_LIFETIME=$BOX_LIFETIME is not seconds" >&2; exit 2; }
	left=$BOX_LIFETIME
else
	echo "box-init: neither BOX_DEADLINE nor BOX_LIFETIME is set; a box must end" >&2
	exit 2
fi
grace=${BOX_KILL_GRACE:-10}
is_count "$grace" || { echo "box-init: BOX_KILL_GRACE=$grace is not seconds" >&2; exit 2; }
if [ "$left" -le 0 ]; then
	echo "box-init: deadline passed $((-left))s ago" >&2
	exit 124
fi
[ "$#" -gt 0 ] || set -- sleep infinity
exec timeout --kill-after="$grace" "$left" "$@"
`
