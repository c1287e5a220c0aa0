# shellcheck shell=bash
# The local base image: a Debian rootfs made by debootstrap plus the pinned
# Node, pushed to the local registry as boxctl/base:<input hash> (and
# :bookworm-node22), then pulled into the Docker engine.
#
# Cached by content: the tag is a hash of every input. Registry has the tag:
# reuse it. Only the rootfs tarball is cached: push it again. Neither:
# debootstrap (a minute or more), tar deterministically, push.

BASE_SUITE=bookworm
BASE_MIRROR=${BOXCTL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
BASE_SECURITY_MIRROR=${BOXCTL_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
BASE_PACKAGES=ca-certificates,git,bash,curl,tini,bubblewrap
BASE_REPO=boxctl/base
BASE_ALIAS=bookworm-node22

# base_keys sets ROOTFS_KEY (what the rootfs tarball depends on: the
# recipe's values and the shell functions that carry it out) and IMAGE_KEY
# (that plus the Go code that wraps the tarball into an image).
base_keys() {
	local srcs
	ROOTFS_KEY=$(printf '%s\n' "$BASE_SUITE" "$BASE_MIRROR" "$BASE_SECURITY_MIRROR" "$BASE_PACKAGES" \
		"$NODE_VERSION" "$NODE_INTEGRITY" "$NPM_VERSION" "$NPM_INTEGRITY" \
		"$(declare -f build_rootfs install_node install_host_cas)" "$(host_cas_digest)" |
		sha256sum | cut -c1-64)
	mapfile -t srcs < <(find "$ROOT/internal/testbed/baseimage" -name '*.go' ! -name '*_test.go' | sort)
	srcs+=("$ROOT/internal/testbed/cmd/testbedctl/pushbase.go")
	IMAGE_KEY=$(printf '%s\n' "$ROOTFS_KEY" "$(sha_of "${srcs[@]}")" \
		"$(gomod_version github.com/google/go-containerregistry)" | sha256sum | cut -c1-64)
}

# manifest_digest REF_PATH: the digest the registry holds for
# REPO/manifests/TAG, or nothing.
manifest_digest() {
	curl -fsS -m 10 -I \
		-H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
		-H 'Accept: application/vnd.oci.image.manifest.v1+json' \
		"http://$REGISTRY/v2/$1" 2>/dev/null |
		tr -d '\r' | awk 'tolower($1) == "docker-content-digest:" { print $2 }' || true
}

# host_cas_digest: a hash of the CA certificates this host added to its own
# trust store, so a change of them rebuilds the rootfs.
host_cas_digest() {
	find /usr/local/share/ca-certificates -type f -name '*.crt' -print0 2>/dev/null |
		sort -z | xargs -0 -r cat | sha256sum | cut -c1-64
}

# install_host_cas ROOTFS: trust in the rootfs the CAs the host trusts beyond
# Debian's (an intercepting egress proxy's, say). The base stands in for a
# public image on this machine only; without them no container or build step
# started from it reaches the npm registry through such a proxy. Node reads
# the system bundle through NODE_EXTRA_CA_CERTS, set in the image config.
install_host_cas() {
	local r=$1
	[[ -d /usr/local/share/ca-certificates ]] || return 0
	find /usr/local/share/ca-certificates -type f -name '*.crt' -exec cp {} "$r/usr/local/share/ca-certificates/" \;
	chroot "$r" update-ca-certificates >>"$LOGS/debootstrap.log" 2>&1 || die "update-ca-certificates failed in the rootfs"
}

# build_rootfs OUT: debootstrap the rootfs, add Node and write it to OUT as a
# deterministic gzip tarball (sorted names, mtime 0, numeric owners).
build_rootfs() {
	local out=$1 work log=$LOGS/debootstrap.log
	work=$CACHE/base/work
	rm -rf "$work"
	mkdir -p "$work"
	: >"$log"
	if ! debootstrap --variant=minbase --include="$BASE_PACKAGES" \
		"$BASE_SUITE" "$work/rootfs" "$BASE_MIRROR" >>"$log" 2>&1; then
		logtail "$log"
		die "debootstrap failed (log: $log)"
	fi
	local r=$work/rootfs
	install_node "$r/usr/local" symlink
	install_host_cas "$r"
	local got
	got=$(chroot "$r" /usr/local/bin/node --version) || die "node does not run in the rootfs"
	[[ $got == "v$NODE_VERSION" ]] || die "rootfs node --version = $got, want v$NODE_VERSION"
	# What the container runtime provides, and what only records this build.
	rm -rf "${r:?}"/dev/* "$r"/proc/* "$r"/sys/* "$r"/run/* "$r"/tmp/* \
		"$r"/var/cache/apt/archives/*.deb "$r"/var/lib/apt/lists/* \
		"$r"/var/log/* "$r"/var/cache/debconf/*-old "$r"/var/lib/dpkg/*-old \
		"$r"/etc/hostname "$r"/etc/resolv.conf "$r"/root/.npm
	mkdir -p "$r/var/lib/apt/lists/partial"
	cat >"$r/etc/apt/sources.list" <<-LIST
		deb $BASE_MIRROR $BASE_SUITE main
		deb $BASE_MIRROR $BASE_SUITE-updates main
		deb $BASE_SECURITY_MIRROR $BASE_SUITE-security main
	LIST
	tar --sort=name --mtime=@0 --numeric-owner --format=posix \
		--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
		-C "$r" -cf - . 2>>"$log" | gzip -n -6 >"$out.tmp"
	mv -f "$out.tmp" "$out"
	rm -rf "$work"
	# Older recipes' tarballs: only the current one is worth its disk.
	find "$CACHE/base" -maxdepth 1 -name 'rootfs-*.tar.gz' ! -path "$out" -delete
}

base_up() {
	base_keys
	local tag=${IMAGE_KEY:0:20} digest how=reused
	local tarball=$CACHE/base/rootfs-${ROOTFS_KEY:0:20}.tar.gz
	digest=$(manifest_digest "$BASE_REPO/manifests/$tag")
	if [[ -z $digest ]]; then
		mkdir -p "$CACHE/base"
		how=pushed
		if [[ ! -f $tarball ]]; then
			how=built
			build_rootfs "$tarball"
		fi
		local ref
		ref=$(testbedctl push-base -layer "$tarball" -repo "$REGISTRY/$BASE_REPO" \
			-tag "$tag" -tag "$BASE_ALIAS" \
			-label "org.opencontainers.image.title=boxctl test bed base" \
			-label "dev.boxctl.testbed.inputs=$IMAGE_KEY" \
			-label "dev.boxctl.testbed.node=v$NODE_VERSION" \
			-label "dev.boxctl.testbed.npm=$NPM_VERSION" 2>>"$LOGS/push-base.log") ||
			{ logtail "$LOGS/push-base.log"; die "push of the base image failed (log: $LOGS/push-base.log)"; }
		digest=${ref##*@}
	elif [[ $(manifest_digest "$BASE_REPO/manifests/$BASE_ALIAS") != "$digest" ]]; then
		retag "$BASE_REPO" "$tag" "$BASE_ALIAS"
	fi
	BASE_IMAGE=$REGISTRY/$BASE_REPO@$digest
	if ! DOCKER_HOST=$DOCKER_HOST_ADDR docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
		DOCKER_HOST=$DOCKER_HOST_ADDR docker pull -q "$BASE_IMAGE" >>"$LOGS/docker-pull.log" 2>&1 ||
			{ logtail "$LOGS/docker-pull.log"; die "docker pull $BASE_IMAGE failed"; }
	fi
	report base "$how" "$BASE_IMAGE (:$tag, :$BASE_ALIAS)"
}

# retag REPO FROM TO: point tag TO at the manifest of tag FROM.
retag() {
	local mt=application/vnd.docker.distribution.manifest.v2+json tmp
	tmp=$(mktemp)
	if ! curl -fsS -m 10 -H "Accept: $mt" -o "$tmp" "http://$REGISTRY/v2/$1/manifests/$2" ||
		! curl -fsS -m 10 -X PUT -H "Content-Type: $mt" --data-binary "@$tmp" \
			"http://$REGISTRY/v2/$1/manifests/$3" >/dev/null; then
		rm -f "$tmp"
		die "retag $1:$2 as $3 failed"
	fi
	rm -f "$tmp"
}
