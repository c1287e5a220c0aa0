package boximage

import (
	"strings"

	"github.com/tangle-network/boxctl/vendors/boxmeta"
)

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
// The deadline can move earlier while the box runs: a watcher reads the
// file BOX_DEADLINE_FILE (default /tmp/.boxctl/deadline) every second and,
// once the Unix seconds it holds are past, ends the box as its deadline
// would (a pooled box's bridge writes its claim's deadline there).
var initScript = strings.NewReplacer("{{deadline}}", boxmeta.EnvDeadline, "{{lifetime}}", boxmeta.EnvLifetime,
	"{{grace}}", boxmeta.EnvKillGrace,
	"{{deadlinefile}}", boxmeta.EnvDeadlineFile, "{{defaultdeadlinefile}}", boxmeta.DeadlineFile).Replace(initTemplate)

// initTemplate is box-init with the lifetime variables' names as
// placeholders (package boxmeta names them).
const initTemplate = `#!/bin/sh
# box-init: run the box's main process until the box's deadline.
# {{deadline}} (Unix seconds) or {{lifetime}} (seconds from now) bound it;
# {{grace}} (seconds, default 10) separates SIGTERM from SIGKILL.
set -eu

is_count() {
	case $1 in
	'' | *[!0-9]*) return 1 ;;
	esac
}

now=$(date +%s)
if [ -n "${{{deadline}}:-}" ]; then
	is_count "${{deadline}}" || { echo "box-init: {{deadline}}=${{deadline}} is not Unix seconds" >&2; exit 2; }
	left=$(({{deadline}} - now))
elif [ -n "${{{lifetime}}:-}" ]; then
	is_count "${{lifetime}}" || { echo "box-init: {{lifetime}}=${{lifetime}} is not seconds" >&2; exit 2; }
	left=${{lifetime}}
else
	echo "box-init: neither {{deadline}} nor {{lifetime}} is set; a box must end" >&2
	exit 2
fi
grace=${{{grace}}:-10}
is_count "$grace" || { echo "box-init: {{grace}}=$grace is not seconds" >&2; exit 2; }
if [ "$left" -le 0 ]; then
	echo "box-init: deadline passed $((-left))s ago" >&2
	exit 124
fi
[ "$#" -gt 0 ] || set -- sleep infinity
# The watcher of a moved deadline: $$ becomes timeout's pid below, and
# SIGALRM is timeout's own expiry (SIGTERM, then SIGKILL after the grace).
f=${{{deadlinefile}}:-{{defaultdeadlinefile}}}
(
	trap '' TERM
	exec >/dev/null
	while sleep 1 && kill -0 $$ 2>/dev/null; do
		d=$(cat "$f" 2>/dev/null) || continue
		is_count "$d" && [ "$d" -le "$(date +%s)" ] || continue
		echo "box-init: the deadline in $f passed" >&2
		kill -ALRM $$
		exit 0
	done
) &
exec timeout --kill-after="$grace" "$left" "$@"
`

// InitScript returns box-init, the script a box image runs as its
// entrypoint (InitFile), for images built elsewhere that must end at
// their deadline as box images do.
func InitScript() []byte { return []byte(initScript) }
