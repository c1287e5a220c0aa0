package boximage

import (
	"github.com/tangle-network/boxctl/internal/imageenv"
	"github.com/tangle-network/boxctl/vendors/boxmeta"

	"bytes"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/tangle-network/boxctl/pins"
)

// dockerfile writes the Dockerfile. Every pin appears on lines of its own,
// so that changing one pin changes only the lines that carry it.
func dockerfile(p *pins.Pins, base pins.Base, hs []pins.Harness, labels map[string]string, o renderOptions) ([]byte, error) {
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }

	w("# Box image rendered by boxctl from its pins: do not edit. Change the pins")
	w("# (boxctl pins bump) and render again. Build it with BuildKit from a context")
	w("# holding this file, %s, harness/ and the static %s binary.", InitFile, BridgeFile)
	w("")
	w("# Node's npm distributions, one stage per platform: a build fetches only")
	w("# its target's, and checks it against the pinned integrity below.")
	arches := make([]string, 0, len(p.Node.Packages))
	sums := map[string]string{}
	for _, pkg := range p.Node.Packages {
		arch := path.Base(pkg.Platform)
		sum, err := sriHex(pkg.Integrity)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", pkg.Platform, err)
		}
		arches, sums[arch] = append(arches, arch), sum
		w("FROM scratch AS node-%s", arch)
		w("ADD %s /node.tgz", tarballURL(pkg.Name, pkg.Version))
	}
	npmSum, err := sriHex(p.Node.NPM.Integrity)
	if err != nil {
		return nil, fmt.Errorf("npm: %w", err)
	}
	w("FROM node-${TARGETARCH} AS node")
	w("FROM scratch AS npm")
	w("ADD %s /npm.tgz", tarballURL(p.Node.NPM.Name, p.Node.NPM.Version))
	w("")
	w("FROM %s", base.Image())
	w("ARG TARGETARCH")
	w(`SHELL ["/bin/sh", "-eu", "-c"]`)
	w("USER root")
	if len(base.Packages) > 0 {
		w("# Debian packages at exact versions.")
		w("RUN apt-get update -q; \\")
		w("    apt-get install -y -q --no-install-recommends \\")
		for _, d := range base.Packages {
			w("      %s=%s \\", d.Name, d.Version)
		}
		w("    ; rm -rf /var/lib/apt/lists/*")
	}
	w("RUN --mount=type=bind,from=node,target=/mnt/node --mount=type=bind,from=npm,target=/mnt/npm \\")
	w(`    case "$TARGETARCH" in \`)
	for _, arch := range arches {
		w("      %s) sum=%s ;; \\", arch, sums[arch])
	}
	w(`      *) echo "no Node pinned for $TARGETARCH" >&2; exit 1 ;; \`)
	w("    esac; \\")
	w(`    echo "$sum  /mnt/node/node.tgz" | sha512sum -c --quiet -; \`)
	w(`    echo "%s  /mnt/npm/npm.tgz" | sha512sum -c --quiet -; \`, npmSum)
	w("    tar -xzf /mnt/node/node.tgz -C /usr/local --strip-components=1 --no-same-owner package/bin/node package/include package/share; \\")
	w("    mkdir -p /usr/local/lib/node_modules/npm; \\")
	w("    tar -xzf /mnt/npm/npm.tgz -C /usr/local/lib/node_modules/npm --strip-components=1 --no-same-owner; \\")
	w("    ln -sf ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm; \\")
	w("    ln -sf ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx; \\")
	w(`    test "$(node --version)" = "v%s"; \`, p.Node.Version)
	w(`    test "$(npm --version)" = "%s"; \`, p.Node.NPM.Version)
	w("    /usr/bin/tini --version; \\")
	w("    bwrap --version")
	w("RUN groupadd --system --gid %d %s; \\", o.uid, o.user)
	w("    useradd --system --uid %d --gid %d --home-dir /home/%s --create-home --shell /bin/sh %s; \\", o.uid, o.uid, o.user, o.user)
	w("    mkdir -p %s %s; \\", o.workspace, HarnessRoot)
	w("    chown %s:%s %s", o.user, o.user, o.workspace)
	for _, h := range hs {
		prefix := HarnessRoot + "/" + h.Name
		w("")
		w("# %s %s (%s@%s), installed with npm ci from its lock under its own prefix.", h.Name, h.Version, h.Package, h.Version)
		w("COPY harness/%s/ %s/", h.Name, prefix)
		w("RUN --mount=type=cache,id=boxctl-npm,target=/root/.npm,sharing=locked \\")
		w("    cd %s; \\", prefix)
		w("    npm ci --omit=dev --no-audit --no-fund --no-update-notifier --loglevel=warn; \\")
		w("    ln -s %s/node_modules/.bin/%s /usr/local/bin/%s; \\", prefix, h.Binary, h.Binary)
		w(`    out="$(%s 2>&1)"; \`, strings.Join(h.VersionCommand, " "))
		w(`    printf '%%s\n' "$out" | grep -Eq '%s' || { echo "%s printed: $out" >&2; exit 1; }`,
			h.VersionPattern, strings.Join(h.VersionCommand, " "))
	}
	w("")
	w("COPY --chmod=0755 %s /usr/local/bin/%s", InitFile, InitFile)
	w("COPY --chmod=0755 %s /usr/local/bin/%s", BridgeFile, p.Bridge.Binary)
	w("ENV %s=%d \\", boxmeta.EnvLifetime, int64(o.lifetime.Seconds()))
	w("    %s=%s \\", imageenv.HarnessRoot, HarnessRoot)
	w("    HOME=/home/%s", o.user)
	w("USER %d:%d", o.uid, o.uid)
	w("WORKDIR %s", o.workspace)
	w("# tini reaps orphans; box-init ends the box at its deadline.")
	w(`ENTRYPOINT ["/usr/bin/tini", "-g", "--", "/usr/local/bin/%s"]`, InitFile)
	w(`CMD ["sleep", "infinity"]`)
	w("LABEL \\")
	keys := slices.Sorted(maps.Keys(labels))
	for i, k := range keys {
		end := " \\"
		if i == len(keys)-1 {
			end = ""
		}
		w("    %s=%s%s", k, quote(labels[k]), end)
	}
	return b.Bytes(), nil
}
