# tensorgate's container image. Three stages on one base: build (npm ci, tsc), deps (production
# dependencies only) and the runtime, which holds node_modules (production), dist/ and proto/ and
# nothing else of ours — no npm, no compiler, no test. Build, run and the CI base: README
# "Container".
#
#   docker build -t tensorgate .
#   docker run --rm -p 8000:8000 -p 8002:8002 -e TENSORGATE_UPSTREAM_BACKENDS=triton:8001 tensorgate
#
# BASE_IMAGE: any Node 24 image laid out as the official one (node in /usr/local/bin; npm in
# /usr/local/lib/node_modules, used by the build stages and deleted from the runtime). CI builds a
# local stand-in from Debian packages (test/deploy/base.sh), as no registry is reachable there.
ARG BASE_IMAGE=node:24-bookworm-slim

FROM ${BASE_IMAGE} AS build
WORKDIR /src
# A C compiler for the native base64 decoder (scripts/build-native.js; Node's headers are in the
# base image), in the build stage only: the runtime image holds its one .node file and no compiler.
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends gcc libc6-dev >/dev/null && rm -rf /var/lib/apt/lists/*
# The CA of a TLS-intercepting proxy, for npm, when the builder mounts one (CI does: its egress is
# such a proxy). Empty by default; build stages only, never in the runtime image.
ARG NODE_EXTRA_CA_CERTS
# The lockfile alone first: this layer (the slow part) is reused until package-lock.json changes.
COPY package.json package-lock.json ./
RUN --mount=type=cache,target=/root/.npm npm ci --no-audit --no-fund --loglevel=error
COPY tsconfig.json tsconfig.build.json ./
# build-native.js builds the native base64 decoder (AVX-512 VBMI or AVX2, chosen at start-up; on
# another CPU, or another architecture, base64 is decoded in WebAssembly).
COPY scripts/copy-generated.js scripts/build-native.js scripts/
COPY proto proto
COPY gateway gateway
RUN npm run -s build

FROM ${BASE_IMAGE} AS deps
WORKDIR /src
ARG NODE_EXTRA_CA_CERTS
COPY package.json package-lock.json ./
# No production dependency has an install script; --ignore-scripts keeps it that way.
RUN --mount=type=cache,target=/root/.npm npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error

FROM ${BASE_IMAGE} AS runtime
# The package managers the base brings (the official image: npm, npx, corepack, yarn).
RUN rm -rf /usr/local/lib/node_modules /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack \
      /usr/local/bin/yarn /usr/local/bin/yarnpkg /opt/yarn-* /root/.npm
WORKDIR /app
COPY --from=deps /src/node_modules node_modules
COPY --from=build /src/dist dist
# The contract, for reference: dist/ runs on the generated code and never reads a .proto.
COPY proto/*.proto proto/
# The demo's chat template (--demo serves the zoo's OpenAI models with it, docs/openai.md).
COPY config/tiny_llm config/tiny_llm
ENV NODE_ENV=production
# glibc malloc: as bin/tensorgate (two arenas, a fixed mmap threshold), so memory freed after a
# burst of large bodies goes back to the system (bench/RESULTS.md "Memory after a burst of bad requests").
ENV MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=131072
# A numeric UID/GID with no passwd entry: Kubernetes' runAsNonRoot can verify a number, not a name.
USER 10001:10001
# 8000: REST (server.port); 8002: /metrics (server.metricsPort).
EXPOSE 8000 8002
# Node runs as PID 1 on purpose, without tini: gateway/main.ts handles SIGTERM and SIGINT (drain,
# then exit 0), and the gateway starts no child process but its own cluster workers, which it
# waits for. Configure with TENSORGATE_* variables (TENSORGATE_CONFIG=/path/to/config.yaml,
# TENSORGATE_UPSTREAM_BACKENDS, TENSORGATE_DEMO=true) or by giving the command with flags.
# --initial-heap-size=64 --no-memory-reducer: as bin/tensorgate.
CMD ["node", "--initial-heap-size=64", "--no-memory-reducer", "dist/gateway/main.js"]
