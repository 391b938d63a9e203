#!/usr/bin/env bash
# The previous release's images (conveyor-worker and conveyor-operator), built with podman from the
# previous-release tree (scripts/previous-release.sh) by its own Dockerfile, for the upgrade run on
# the real node (`make upgrade-demo`). Both releases may carry the same package version, so these
# are tagged <version>-<commit7> (e.g. localhost/conveyor-worker:0.1.0-acb913e), never the plain
# version this release's `make images` owns. Cached in the project's podman storage beside them
# (images/containers.sh); a stamp per image keeps a second run to one line.
#
#   bash scripts/previous-release-images.sh [--print-tag]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
say() { echo "previous-release-images: $*"; }
die() {
  echo "previous-release-images: error: $*" >&2
  exit 1
}
bash "$ROOT/scripts/previous-release.sh"
dir="$(bash "$ROOT/scripts/previous-release.sh" --print-dir)"
commit="$(sed -n 's/^PREVIOUS_RELEASE=\([0-9a-f]*\).*/\1/p' "$ROOT/scripts/previous-release.sh")"
version="$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$dir/package.json" | head -1)"
tag="$version-${commit:0:7}"
if [ "${1:-}" = "--print-tag" ]; then
  echo "$tag"
  exit 0
fi
[ "$(id -u)" -eq 0 ] || die "building needs root (rootful podman)"
# shellcheck source=images/containers.sh
source "$ROOT/images/containers.sh"
export PATH="$PATH:/usr/sbin:/sbin"
# This release's base image (the same NODE_IMAGE in both Dockerfiles) comes from `make images`.
base="docker.io/library/$(sed -n 's/^ARG NODE_IMAGE=//p' "$dir/Dockerfile")"
podman image exists "$base" || die "the base image $base is missing: run 'make images' first"
exec 9>"$CONVEYOR_CONTAINERS/build.lock"
if ! flock -n 9; then
  say "waiting for another build of the images to finish"
  flock 9
fi
ca="${NODE_EXTRA_CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}"
mounts=()
if [ -f "$ca" ]; then
  printf 'cafile=/run/conveyor-build/ca.crt\n' >"$CONVEYOR_CONTAINERS/build.npmrc"
  mounts=(-v "$ca:/run/conveyor-build/ca.crt:ro" -v "$CONVEYOR_CONTAINERS/build.npmrc:/root/.npmrc:ro")
fi
log="$CONVEYOR_CONTAINERS/previous-release-build.log"
for target in worker operator; do
  name="conveyor-$target"
  stamp="$CONVEYOR_CONTAINERS/$name-$tag.built"
  id="$(podman image inspect --format '{{.Id}}' "localhost/$name:$tag" 2>/dev/null || true)"
  if [ -n "$id" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$commit $id" ]; then
    say "$name:$tag cached"
    continue
  fi
  say "building $name:$tag from ${commit:0:7} (--target $target; a few minutes cold) ..."
  start=$SECONDS
  # (the build context is the previous tree: its .dockerignore keeps its node_modules and dist out)
  if ! podman build --pull=never --network=host --layers --target "$target" $(conveyor_ulimits) \
    "${mounts[@]}" --build-arg "VERSION=$version" --build-arg "REVISION=$commit" \
    -t "localhost/$name:$tag" -t "ghcr.io/conveyor-dev/$name:$tag" \
    -f "$dir/Dockerfile" "$dir" >"$log" 2>&1; then
    tail -30 "$log" >&2
    die "building $name:$tag failed (full log: $log)"
  fi
  echo "$commit $(podman image inspect --format '{{.Id}}' "localhost/$name:$tag")" >"$stamp"
  say "built $name:$tag in $((SECONDS - start)) s"
done
