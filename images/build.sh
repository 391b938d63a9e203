#!/usr/bin/env bash
# `make images`: builds conveyor-worker, conveyor-worker-python and conveyor-operator from the repository's Dockerfile
# (the same `--target worker|operator` a user's `docker build` uses) with rootful podman, no
# registry needed. Idempotent and cached: the base image is made once, each target is rebuilt
# only when its inputs (Dockerfile, build context, version, revision) change, and podman's layer
# cache makes a rebuild pay only for the layers that changed. State lives under
# ~/.cache/conveyor/containers (images/containers.sh). docs/install.md tells the whole story.
#
#   bash images/build.sh [--force]     (IMAGES_VERBOSE=1 shows the build output)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
force=0
[ "${1:-}" = "--force" ] && force=1
step() { echo "images: $*"; }
die() {
  echo "images: $*" >&2
  exit 1
}

bash scripts/images-deps.sh
for tool in podman buildah debootstrap; do
  command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] || die "$tool is missing (apt-get install $tool)"
done
command -v runc >/dev/null || [ -x /usr/sbin/runc ] || die "runc is missing (apt-get install runc)"
[ "$(id -u)" -eq 0 ] || die "building needs root (rootful podman; debootstrap makes the base image)"
# shellcheck source=images/containers.sh
source images/containers.sh
export PATH="$PATH:/usr/sbin:/sbin"
# One build at a time per cache (test files and make may start it concurrently).
exec 9>"$CONVEYOR_CONTAINERS/build.lock"
if ! flock -n 9; then
  step "waiting for another build of the images to finish"
  flock 9
fi

VERSION="$(node -p 'require("./package.json").version')"
REVISION="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
# The build context: what .dockerignore's allowlist lets in.
mapfile -t context < <(sed -n 's/^!//p' .dockerignore)
if [ "$REVISION" != unknown ] && [ -n "$(git status --porcelain -- Dockerfile .dockerignore "${context[@]}" 2>/dev/null)" ]; then
  REVISION="$REVISION-dirty"
fi
NODE_IMAGE="$(sed -n 's/^ARG NODE_IMAGE=//p' Dockerfile)"
NODE_VERSION="${NODE_IMAGE#node:}"
NODE_VERSION="${NODE_VERSION%%-*}"
# npm for the base (the node npm package ships the binary only); the one Node 24 LTS bundles.
NPM_VERSION=11.6.2
LOG="$CONVEYOR_CONTAINERS/build.log"

# ---- the base: a local stand-in for the official node:<version>-bookworm-slim image
base_ref="docker.io/library/$NODE_IMAGE"
if ! podman image exists "$base_ref"; then
  node_bin="$ROOT/node_modules/node/bin/node"
  [ -x "$node_bin" ] || die "the pinned Node binary is missing: run 'npm ci' first (make node-deps)"
  [ "$("$node_bin" -p process.versions.node)" = "$NODE_VERSION" ] ||
    die "node_modules/node is not Node $NODE_VERSION (the Dockerfile's NODE_IMAGE): run 'npm ci'"
  work="$CONVEYOR_CONTAINERS/base.tmp"
  rm -rf "$work"
  mkdir -p "$work"
  mirror="$(grep -rhoE 'https?://[^ ]*/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null | head -1 | tr -d ' ' || true)"
  mirror="${mirror:-http://deb.debian.org/debian}"
  step "base $NODE_IMAGE: debootstrap --variant=minbase bookworm from $mirror (about 30 s)"
  debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    die "debootstrap failed (log: $work/debootstrap.log)"
  rootfs="$work/rootfs"
  # debian-slim's dpkg and apt settings: no docs/man/locales, no apt caches kept
  cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
CFG
  cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'CFG'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
CFG
  echo 'Acquire::Languages "none";' >"$rootfs/etc/apt/apt.conf.d/docker-no-languages"
  printf 'deb %s bookworm main\ndeb %s bookworm-updates main\ndeb http://deb.debian.org/debian-security bookworm-security main\n' "$mirror" "$mirror" >"$rootfs/etc/apt/sources.list"
  find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$rootfs"/usr/share/{man,groff,info,lintian,linda}/* "$rootfs"/var/lib/apt/lists/* \
    "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/log/* \
    "$rootfs"/var/cache/debconf/*-old "$rootfs"/var/lib/dpkg/*-old
  find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
  # Node and npm where the official image has them
  install -m 0755 "$node_bin" "$rootfs/usr/local/bin/node"
  npm_tgz="$CONVEYOR_CONTAINERS/npm-$NPM_VERSION.tgz"
  if [ ! -f "$npm_tgz" ]; then
    step "base: npm $NPM_VERSION from the npm registry"
    (cd "$work" && npm pack "npm@$NPM_VERSION" --silent >/dev/null && mv "npm-$NPM_VERSION.tgz" "$npm_tgz")
  fi
  mkdir -p "$rootfs/usr/local/lib/node_modules/npm"
  tar -xzf "$npm_tgz" -C "$rootfs/usr/local/lib/node_modules/npm" --strip-components=1 --no-same-owner
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"
  step "base: importing as $base_ref"
  tar -C "$rootfs" --numeric-owner -cf - . | podman import \
    --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    --change "ENV NODE_VERSION=$NODE_VERSION" \
    --change 'CMD ["node"]' \
    --message "local stand-in for $NODE_IMAGE: debootstrap minbase bookworm + Node $NODE_VERSION + npm $NPM_VERSION" \
    - "$base_ref" >/dev/null
  rm -rf "$work"
fi

# ---- the two targets
# Inputs of a target: the Dockerfile and every file of the build context (.dockerignore's
# allowlist), the base image, version and revision. Stored beside the image id in the cache dir
# (not as a label: buildah's layer cache ignores --label); equal → nothing to do.
inputs="$({
  podman image inspect --format '{{.Id}}' "$base_ref"
  echo "$VERSION $REVISION"
  find Dockerfile .dockerignore "${context[@]}" -type f -not -name '*.test.ts' -not -path '*/node_modules/*' -print0 |
    sort -z | xargs -0 sha256sum
} | sha256sum | cut -c1-16)"

# npm ci inside the build trusts the machine's CA bundle: mounted for RUN steps only (no layer
# keeps it), with an npmrc naming it.
ca="${NODE_EXTRA_CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}"
build_mounts=()
if [ -f "$ca" ]; then
  printf 'cafile=/run/conveyor-build/ca.crt\n' >"$CONVEYOR_CONTAINERS/build.npmrc"
  build_mounts=(-v "$ca:/run/conveyor-build/ca.crt:ro" -v "$CONVEYOR_CONTAINERS/build.npmrc:/root/.npmrc:ro")
fi

for target in worker worker-python operator; do
  name="conveyor-$target"
  stamp="$CONVEYOR_CONTAINERS/$name.inputs"
  id="$(podman image inspect --format '{{.Id}}' "localhost/$name:$VERSION" 2>/dev/null || true)"
  if [ "$force" -eq 0 ] && [ -n "$id" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$inputs $id" ]; then
    step "$name:$VERSION up to date ($(podman image inspect --format '{{.Size}}' "localhost/$name:$VERSION" | numfmt --to=si)B, revision $REVISION)"
    continue
  fi
  step "building $name:$VERSION (--target $target, revision $REVISION)"
  start=$SECONDS
  # RUN steps get the host's own limits (buildah's default asks for more than the host allows)
  if ! podman build --pull=never --network=host --layers --target "$target" \
    $(conveyor_ulimits) \
    "${build_mounts[@]}" \
    --build-arg "VERSION=$VERSION" --build-arg "REVISION=$REVISION" \
    -t "localhost/$name:$VERSION" -t "ghcr.io/conveyor-dev/$name:$VERSION" \
    -f Dockerfile . >"$LOG" 2>&1; then
    tail -30 "$LOG" >&2
    die "building $name failed (full log: $LOG)"
  fi
  if [ "${IMAGES_VERBOSE:-0}" = 1 ]; then cat "$LOG"; fi
  # buildah's layer cache keys LABEL steps by their text, not the build args' values, so a cached
  # LABEL layer may carry another revision: set the OCI labels on the result when they differ.
  labels="$(podman image inspect --format '{{index .Labels "org.opencontainers.image.version"}} {{index .Labels "org.opencontainers.image.revision"}}' "localhost/$name:$VERSION")"
  if [ "$labels" != "$VERSION $REVISION" ]; then
    ctr="$(buildah from --pull-never "localhost/$name:$VERSION")"
    buildah config --label "org.opencontainers.image.version=$VERSION" \
      --label "org.opencontainers.image.revision=$REVISION" "$ctr"
    buildah commit --quiet --rm "$ctr" "localhost/$name:$VERSION" >/dev/null
    podman tag "localhost/$name:$VERSION" "ghcr.io/conveyor-dev/$name:$VERSION"
  fi
  echo "$inputs $(podman image inspect --format '{{.Id}}' "localhost/$name:$VERSION")" >"$stamp"
  step "built $name:$VERSION in $((SECONDS - start)) s, $(podman image inspect --format '{{.Size}}' "localhost/$name:$VERSION" | numfmt --to=si)B"
done
# No prune here: the untagged images are the layer cache of the build stages. To reclaim space:
#   CONTAINERS_STORAGE_CONF=~/.cache/conveyor/containers/storage.conf podman image prune -f
