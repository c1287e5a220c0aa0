# shellcheck shell=bash
# The binaries of the test bed's Kubernetes: the control plane, kubelet and
# kubectl built from the k8s.io/kubernetes module, the agent-sandbox
# controller from its module, and the pause binary of the pod sandboxes.
#
# The kubernetes module zip ships a go.work over a staging/ tree it does not
# hold, so it is built from a writable copy in the cache with go.work and the
# staging replace block removed and every k8s.io staging module required at
# its release. Each binary carries a .stamp of what it was built from; a
# warm `up` builds nothing. The Go build cache is the default one, so the
# next cold copy compiles in seconds.

KUBE_VERSION=v1.35.4
KUBE_STAGING_VERSION=v0.35.4
# The agent-sandbox controller is the one the Kubernetes vendor's client
# types come from: the version go.mod requires.
AGENT_SANDBOX_VERSION=$(gomod_version sigs.k8s.io/agent-sandbox)
KUBE_BINS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
KUBECTL=$BIN/kubectl
SANDBOX_CTRL_EXE=$BIN/agent-sandbox-controller
PAUSE_EXE=$BIN/pause
LOCALPV_EXE=$BIN/localpv

# module_dir MODULE@VERSION: print the module's directory in the module
# cache, downloading it when missing.
module_dir() {
	local out dir
	out=$(cd "$CACHE" && GOWORK=off go mod download -json "$1" 2>&1) ||
		{ printf '%s\n' "$out" | tail -n 20 >&2; die "go mod download $1 failed"; }
	dir=$(awk -F'"' '$2 == "Dir" { print $4 }' <<<"$out")
	[[ -d $dir ]] || die "go mod download $1 gave no directory: $out"
	echo "$dir"
}

# writable_copy MODULE@VERSION DEST EDIT: make DEST a writable copy of the
# module with the function EDIT applied to it, unless DEST already holds
# one made by the same recipe.
writable_copy() {
	local mod=$1 dest=$2 edit=$3 key src
	key=$(printf '%s\n' "$mod" "$(declare -f "$edit")" | sha256sum | cut -c1-64)
	if [[ -f $dest/.testbed-copy && $(<"$dest/.testbed-copy") == "$key" ]]; then
		return 0
	fi
	src=$(module_dir "$mod")
	rm -rf "$dest" "$dest.tmp"
	cp -R "$src" "$dest.tmp"
	chmod -R u+w "$dest.tmp"
	"$edit" "$dest.tmp"
	printf '%s\n' "$key" >"$dest.tmp/.testbed-copy"
	mv "$dest.tmp" "$dest"
}

# kube_src_edit DIR: turn the kubernetes module in DIR into a standalone
# module: no workspace, staging modules from the proxy at their release.
kube_src_edit() {
	local d=$1 m args=()
	rm -f "$d/go.work" "$d/go.work.sum"
	while read -r m; do
		args+=("-dropreplace=$m")
	done < <(awk '$2 == "=>" && $3 ~ /^\.\/staging\// { print $1 }' "$d/go.mod")
	while read -r m; do
		args+=("-require=$m@$KUBE_STAGING_VERSION")
	done < <(awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" { print $1 }' "$d/go.mod")
	[[ ${#args[@]} -gt 0 ]] || die "k8s.io/kubernetes@$KUBE_VERSION: no staging modules in its go.mod"
	(cd "$d" && go mod edit "${args[@]}") || die "go mod edit of the kubernetes copy failed"
}

# sandbox_src_edit DIR: the agent-sandbox module builds as it is.
sandbox_src_edit() {
	[[ -f $1/cmd/agent-sandbox-controller/main.go ]] || die "agent-sandbox: no cmd/agent-sandbox-controller in $1"
}

# kube_ldflags: the version stamps `make` puts into Kubernetes binaries.
kube_ldflags() {
	local minor=${KUBE_VERSION#v1.} p flags=(-s -w)
	minor=${minor%%.*}
	for p in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
		flags+=("-X=$p.gitVersion=$KUBE_VERSION" "-X=$p.gitMajor=1" "-X=$p.gitMinor=$minor" "-X=$p.gitTreeState=clean")
	done
	echo "${flags[*]}"
}

# stamp_ok NAME STAMP: $BIN/NAME exists and was built from STAMP.
stamp_ok() {
	[[ -x $BIN/$1 && -f $BIN/$1.stamp && $(<"$BIN/$1.stamp") == "$2" ]]
}

# gobuild DIR LOG OUT LDFLAGS PKG...: a static build of PKGs in the module
# at DIR into OUT (a directory when several), the log in LOG.
gobuild() {
	local dir=$1 log=$2 out=$3 ldflags=$4
	shift 4
	if ! (cd "$dir" && GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 \
		go build -o "$out" -ldflags "$ldflags" "$@") >"$log" 2>&1; then
		logtail "$log"
		die "go build $* in $dir failed (log: $log)"
	fi
}

# repo_binary NAME EXE STAMP: build ./internal/testbed/cmd/NAME static to
# EXE unless its stamp is STAMP (sets the caller's how=built when it
# builds). In this repository's module, which go.mod must not change: no
# -mod=mod.
repo_binary() {
	local name=$1 exe=$2 stamp=$3 log=$LOGS/go-build-$1.log
	stamp_ok "$name" "$stamp" && return 0
	how=built
	if ! (cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$exe.new" "./internal/testbed/cmd/$name") >"$log" 2>&1; then
		logtail "$log"
		die "go build ./internal/testbed/cmd/$name failed (log: $log)"
	fi
	mv -f "$exe.new" "$exe"
	printf '%s\n' "$stamp" >"$exe.stamp"
}

kube_bins_up() {
	[[ -n $AGENT_SANDBOX_VERSION ]] || die "go.mod does not require sigs.k8s.io/agent-sandbox"
	local gover ldflags stamp b need=() how=reused t0=$SECONDS
	gover=$(go env GOVERSION)
	ldflags=$(kube_ldflags)
	stamp=$(printf '%s\n' "$KUBE_VERSION" "$gover" "$ldflags" "$(declare -f kube_src_edit gobuild)" | sha256sum | cut -c1-64)
	for b in "${KUBE_BINS[@]}"; do
		stamp_ok "$b" "$stamp" || need+=("$b")
	done
	if [[ ${#need[@]} -gt 0 ]]; then
		how=built
		local src=$CACHE/k8s-src-$KUBE_VERSION out=$BIN/.kube-build pkgs=()
		echo "testbed: building Kubernetes $KUBE_VERSION: ${need[*]} (log: $LOGS/kube-build.log; minutes when cold)" >&2
		writable_copy "k8s.io/kubernetes@$KUBE_VERSION" "$src" kube_src_edit
		for b in "${need[@]}"; do
			pkgs+=("./cmd/$b")
		done
		rm -rf "$out"
		mkdir -p "$out"
		gobuild "$src" "$LOGS/kube-build.log" "$out/" "$ldflags" "${pkgs[@]}"
		for b in "${need[@]}"; do
			mv -f "$out/$b" "$BIN/$b"
			printf '%s\n' "$stamp" >"$BIN/$b.stamp"
		done
		rmdir "$out"
	fi

	stamp=$(printf '%s\n' "$AGENT_SANDBOX_VERSION" "$gover" "$(declare -f sandbox_src_edit gobuild)" | sha256sum | cut -c1-64)
	if ! stamp_ok agent-sandbox-controller "$stamp"; then
		how=built
		local src=$CACHE/agent-sandbox-src-$AGENT_SANDBOX_VERSION
		writable_copy "sigs.k8s.io/agent-sandbox@$AGENT_SANDBOX_VERSION" "$src" sandbox_src_edit
		gobuild "$src" "$LOGS/agent-sandbox-build.log" "$SANDBOX_CTRL_EXE.new" "-s -w" ./cmd/agent-sandbox-controller
		mv -f "$SANDBOX_CTRL_EXE.new" "$SANDBOX_CTRL_EXE"
		printf '%s\n' "$stamp" >"$SANDBOX_CTRL_EXE.stamp"
	fi

	local srcs
	mapfile -t srcs < <(find "$ROOT/internal/testbed/cmd/pause" -name '*.go' ! -name '*_test.go' | sort)
	repo_binary pause "$PAUSE_EXE" "$(sha_of "${srcs[@]}") $gover"
	# The volume provisioner links the repository's packages and modules.
	mapfile -t srcs < <(find "$ROOT/internal/testbed/cmd/localpv" "$ROOT/internal/treecopy" -name '*.go' ! -name '*_test.go' | sort)
	repo_binary localpv "$LOCALPV_EXE" "$(sha_of "${srcs[@]}" "$ROOT/go.sum") $gover"

	local got
	got=$("$KUBECTL" version --client -o yaml 2>/dev/null | awk '$1 == "gitVersion:" { print $2; exit }')
	[[ $got == "$KUBE_VERSION" ]] || die "$KUBECTL reports version ${got:-none}, want $KUBE_VERSION"
	report kube-bin "$how" "$BIN (Kubernetes $KUBE_VERSION, agent-sandbox $AGENT_SANDBOX_VERSION$([[ $how == built ]] && echo ", $((SECONDS - t0)) s"))"
}
