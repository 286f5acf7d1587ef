# syntax=docker/dockerfile:1
# model-gateway container image (docs/deployment.md).
#   docker build -t model-gateway .
#   docker run -p 8080:8080 -e GATEWAY_API_KEYS=... -e OPENAI_API_KEY=... model-gateway
# Node 24 is the version the gateway is tested and benchmarked on (the `node`
# devDependency pins it for npm scripts); both stages take it from the base image.
ARG NODE_IMAGE=node:24-slim

# ---- build: every dependency, TypeScript compiled to dist/ ----
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: compiling needs no install script. The `node` devDependency's
# would download a second Node 24 (the base image has it), and the root's
# `prepare` is the build the next RUN does once the sources are in.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
COPY plugins ./plugins
# Only src/ and plugins/ are compiled (tests and benchmarks are not in the
# image); source maps and declarations are of no use at run time.
RUN npm run build && find dist -name '*.map' -delete && find dist -name '*.d.ts' -delete

# ---- runtime: production dependencies and the compiled gateway only ----
FROM ${NODE_IMAGE} AS runtime
# jemalloc (Debian's libjemalloc2) instead of glibc's malloc. After a load of
# agent conversations (100-400 KB bodies) glibc keeps the freed buffers'
# fragments in its heap, and never hands them back (Node does not call
# malloc_trim): the gateway stayed at 166 MB a minute after such a load,
# against 89 MB before it. jemalloc returns freed pages a second after they
# fall idle (dirty_decay_ms; background_thread does it while the gateway
# idles): 103-111 MB, back at its baseline, for about 2 MB more at idle
# (docs/performance.md, "Memory"). Read only when the process starts, so set
# here. MALLOC_MMAP_THRESHOLD_ is glibc's setting for the same problem, used
# only if the preload is removed: buffers of 128 KB and more mapped on their own.
RUN apt-get update && apt-get install -y --no-install-recommends libjemalloc2 && rm -rf /var/lib/apt/lists/* && ln -s "$(dpkg -L libjemalloc2 | grep '/libjemalloc.so.2$')" /usr/local/lib/libjemalloc.so.2
ENV NODE_ENV=production \
    LD_PRELOAD=/usr/local/lib/libjemalloc.so.2 \
    MALLOC_CONF=background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0 \
    MALLOC_MMAP_THRESHOLD_=131072
WORKDIR /app
COPY package.json package-lock.json ./
# No production dependency has an install script the gateway needs (they are
# pure JavaScript; SQLite is Node's own node:sqlite), and the root's `prepare`
# would compile with a TypeScript this stage does not have. --omit=optional:
# TypeScript is also an optional peer of valibot, which --omit=dev alone keeps
# (23 MB); the only other optional package, pg-cloudflare, serves pg on
# Cloudflare Workers only.
RUN npm ci --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist/src ./dist/src
COPY --from=build /app/dist/plugins ./dist/plugins
# The dashboard's page (GET /dashboard), read from the package root.
COPY dashboard ./dashboard
# The shipped catalog; mount your own file over it, or elsewhere and point
# GATEWAY_CONFIG at it. Storage paths default to the data directory below
# (the shipped file reads GATEWAY_RESPONSES_DB and GATEWAY_USAGE_DB).
COPY gateway.yaml /etc/model-gateway/gateway.yaml
# NODE_COMPILE_CACHE: where `start` keeps V8's compiled code of its modules, so
# that a restart loads it instead of compiling them again (about 50 ms of a
# 280 ms start; docs/performance.md, "Start-up"). Written by the first start,
# as the unprivileged user.
RUN mkdir -p /var/lib/model-gateway /var/cache/model-gateway && chown node:node /var/lib/model-gateway /var/cache/model-gateway
ENV NODE_COMPILE_CACHE=/var/cache/model-gateway \
    GATEWAY_CONFIG=/etc/model-gateway/gateway.yaml \
    GATEWAY_RESPONSES_DB=/var/lib/model-gateway/responses.sqlite \
    GATEWAY_USAGE_DB=/var/lib/model-gateway/usage.sqlite \
    PORT=8080
# The base image's unprivileged `node` user (uid 1000), by number so that
# Kubernetes' runAsNonRoot can verify it.
USER 1000:1000
EXPOSE 8080
# /healthz answers 200 once the gateway listens, 503 while it drains. The slim
# image has no curl: Node asks.
HEALTHCHECK --interval=10s --timeout=5s --start-period=15s --retries=3 \
  CMD ["node", "-e", "require('node:http').get({host:'127.0.0.1',port:process.env.PORT||8080,path:'/healthz',timeout:3000},(r)=>process.exit(r.statusCode===200?0:1)).on('timeout',()=>process.exit(1)).on('error',()=>process.exit(1))"]
# SIGTERM drains (server.shutdown_timeout_ms) and exits 0; SIGHUP reloads the config.
CMD ["node", "dist/src/cli.js", "start"]
