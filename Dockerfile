# syntax=docker/dockerfile:1
# Conveyor's images from one build context (the repository root):
#
#   docker build --target worker        -t ghcr.io/conveyor-dev/conveyor-worker:0.1.0        .
#   docker build --target worker-python -t ghcr.io/conveyor-dev/conveyor-worker-python:0.1.0 .
#   docker build --target operator      -t ghcr.io/conveyor-dev/conveyor-operator:0.1.0      .
#
# conveyor-worker-python is the worker plus Debian's Python 3 and the handler kit, for pools with
# `handler: {python: …}` (the worker starts `python3 -m conveyor.handler --stdio` itself).
#
# Both run the same `conveyor` command — the packed @conveyor-dev/conveyor npm package, as
# `make release` builds it, installed in /app with @conveyor-dev/queue — as uid/gid
# 65532, under tini as PID 1: tini forwards SIGTERM to node — the worker's warm shutdown starts
# on it — and reaps the processes command handlers leave behind. tini runs WITHOUT -g: a
# command handler's child must not get the pod's SIGTERM, the worker decides when to stop it.
# Nothing is written outside /tmp, so the pods run with readOnlyRootFilesystem and an emptyDir
# on /tmp. The repository's `node` devDependency (it downloads a Node binary in an install
# script) is never installed here: every npm install skips install scripts, and the images have
# production dependencies only — the worker's without the operator's Kubernetes client. Linted by
# test/images/dockerfile.test.ts (BuildKit's checks, offline); built and run by test/images/
# (`make images`, docs/install.md). VERSION and REVISION fill the OCI labels:
#
#   docker build --target worker --build-arg VERSION=0.1.0 --build-arg REVISION=$(git rev-parse HEAD) .
ARG NODE_IMAGE=node:24.21.0-bookworm-slim

# ---- compile and pack: the two npm packages `make release` publishes, @conveyor-dev/queue and
# @conveyor-dev/conveyor (scripts/release/packages.ts), so the images run the very artifact
# `npx @conveyor-dev/conveyor` installs
FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
# Without install scripts the `node` devDependency has no binary; drop its dangling bin link so
# the build uses the image's node.
RUN npm ci --ignore-scripts --no-audit --no-fund \
 && rm -f node_modules/.bin/node
COPY tsconfig.json tsconfig.build.json ./
COPY lib/ lib/
COPY queue/ queue/
COPY records/ records/
COPY worker/ worker/
COPY operator/ operator/
COPY cli/ cli/
COPY api/ api/
COPY dashboard/ dashboard/
COPY bin/ bin/
COPY packages/ packages/
COPY scripts/release/ scripts/release/
RUN node scripts/release/packages.ts /src/npm

# ---- production dependencies only (no install scripts): the packed command, unpacked as /app,
# and its dependencies at the versions the repository's package-lock.json locks (npm keeps a
# lock's versions where they satisfy package.json); the library from its packed tarball
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY --from=build /src/npm/ /tmp/npm/
COPY package-lock.json /tmp/npm/
RUN tar -xzf /tmp/npm/conveyor-dev-conveyor-*.tgz --strip-components=1 --no-same-owner \
 && cp /tmp/npm/package-lock.json ./ \
 && npm install --omit=dev --ignore-scripts --no-save --no-audit --no-fund /tmp/npm/conveyor-dev-queue-*.tgz \
 && rm -rf package-lock.json /tmp/npm \
 && npm cache clean --force

# ---- the worker's: the same less the operator (its code, the Kubernetes client and its
# dependency tree). --no-save: package.json stays as packed.
FROM deps AS worker-deps
RUN npm uninstall --no-save --omit=dev --ignore-scripts --offline --no-audit --no-fund @kubernetes/client-node \
 && find node_modules -type d -empty -delete \
 && rm -rf dist/operator \
 && npm cache clean --force

# ---- what both images share: tini, the user, the packed command's manifest and bin (each image
# adds its dist/ and node_modules/; apt's lists and caches removed whatever the base image keeps)
FROM ${NODE_IMAGE} AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini=0.19.0-1+b3 \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log \
 && groupadd --system --gid 65532 conveyor \
 && useradd --system --uid 65532 --gid 65532 --home-dir /tmp --no-create-home --shell /usr/sbin/nologin conveyor
WORKDIR /app
ENV NODE_ENV=production \
    HOME=/tmp \
    TMPDIR=/tmp
COPY --from=deps /app/package.json /app/README.md ./
COPY --from=deps /app/bin/ bin/
RUN ln -s /app/bin/conveyor.js /usr/local/bin/conveyor
USER 65532:65532
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/conveyor"]
LABEL org.opencontainers.image.source="https://github.com/conveyor-dev/conveyor" \
      org.opencontainers.image.licenses="Apache-2.0"

# ---- the operator: `conveyor operator` (flags: conveyor operator --help)
FROM runtime AS operator
COPY --from=deps /app/dist/ dist/
COPY --from=deps /app/node_modules/ node_modules/
RUN node /app/bin/conveyor.js operator --help > /dev/null
# 8080: /metrics /healthz /readyz; 6443: external.metrics.k8s.io (TLS)
EXPOSE 8080/tcp 6443/tcp
CMD ["operator"]
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="conveyor-operator" \
      org.opencontainers.image.description="Conveyor WorkerPool operator" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"

# ---- the worker with Python 3 and the handler kit (clients/python's `conveyor` package; its
# handler module is standard library only), for `handler: {python: {callable: …}}` pools: FROM
# this image, add your handler modules (on PYTHONPATH or in the working directory /app).
FROM runtime AS worker-python
USER root
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3=3.11.2-1+b1 \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log
COPY clients/python/conveyor/ /usr/local/lib/python3.11/dist-packages/conveyor/
COPY --from=worker-deps /app/dist/ dist/
COPY --from=worker-deps /app/node_modules/ node_modules/
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
RUN node /app/bin/conveyor.js worker --help > /dev/null \
 && python3 -c "import conveyor.handler"
EXPOSE 9464/tcp
CMD ["worker"]
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="conveyor-worker-python" \
      org.opencontainers.image.description="Conveyor generic queue worker with Python 3 and the handler kit" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"

# ---- the generic worker (the default target): `conveyor worker`, configured by CONVEYOR_* env.
# Add handlers with FROM this image (docs/install.md, examples/handlers/Dockerfile).
FROM runtime AS worker
COPY --from=worker-deps /app/dist/ dist/
COPY --from=worker-deps /app/node_modules/ node_modules/
RUN node /app/bin/conveyor.js worker --help > /dev/null
# 9464: /healthz /readyz /metrics
EXPOSE 9464/tcp
CMD ["worker"]
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="conveyor-worker" \
      org.opencontainers.image.description="Conveyor generic queue worker" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
