#!/usr/bin/env bash
# The previous release of Conveyor, for the mixed-version tests (test/upgrade): a pinned commit of
# this repository, extracted with `git archive`, its npm dependencies installed and built, cached
# outside the repo keyed on the commit. Later releases bump PREVIOUS_RELEASE.
#
# Usage:
#   previous-release.sh              build what is missing (idempotent; one line when cached)
#   previous-release.sh --print-dir  print the directory of the previous release (builds nothing)
#
# Environment:
#   CONVEYOR_PREVIOUS_RELEASE  a built checkout of the previous release; used as is
#   CONVEYOR_CACHE_DIR         cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/conveyor)
set -euo pipefail

PREVIOUS_RELEASE=acb913e9b03dacaffb72849c487481795ac5c473 # 0.1.0 as of 2026-11-27

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache_root="${CONVEYOR_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/conveyor}"
dir="${CONVEYOR_PREVIOUS_RELEASE:-$cache_root/release-$PREVIOUS_RELEASE}"

log() { printf 'previous-release: %s\n' "$*" >&2; }
die() {
  printf 'previous-release: error: %s\n' "$*" >&2
  exit 1
}

case "${1:-}" in
  --print-dir) echo "$dir"; exit 0 ;;
  "") ;;
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) die "unknown argument '$1' (try --help)" ;;
esac

if [ -n "${CONVEYOR_PREVIOUS_RELEASE:-}" ]; then
  [ -f "$dir/bin/conveyor.js" ] && [ -x "$dir/node_modules/.bin/node" ] ||
    die "CONVEYOR_PREVIOUS_RELEASE=$dir is not a built checkout (no bin/conveyor.js or node_modules/.bin/node)"
  log "using CONVEYOR_PREVIOUS_RELEASE=$dir"
  exit 0
fi
if [ -f "$dir/.complete" ]; then
  log "cached: $dir (${PREVIOUS_RELEASE:0:7})"
  exit 0
fi

git -C "$repo" cat-file -e "$PREVIOUS_RELEASE^{commit}" 2>/dev/null ||
  die "commit $PREVIOUS_RELEASE is not in $repo (a shallow clone? run: git fetch --unshallow)"

mkdir -p "$cache_root"
exec 9>"$cache_root/.previous-release.lock"
flock 9
[ -f "$dir/.complete" ] && { log "cached: $dir (built by another run)"; exit 0; }

started=$SECONDS
work=$(mktemp -d "$cache_root/.release-XXXXXX")
trap 'rm -rf "$work"' EXIT
step() { # name, command…: one progress line before and after, the command's output on failure
  local name=$1 t=$SECONDS out
  shift
  log "$name ..."
  out="$work.log"
  if ! "$@" >"$out" 2>&1; then
    tail -n 40 "$out" >&2
    die "$name failed (log above, full log: $out)"
  fi
  rm -f "$out"
  log "$name done in $((SECONDS - t))s"
}

step "extract ${PREVIOUS_RELEASE:0:7}" bash -c "git -C '$repo' archive '$PREVIOUS_RELEASE' | tar -x -C '$work'"
# Its own pinned Node runs its npm ci, so the optional packages that want Node >= 22 install too.
step "npm ci" bash -c "cd '$work' && PATH='$repo/node_modules/.bin':\$PATH npm ci --no-audit --no-fund"
step "npm run build" bash -c "cd '$work' && PATH='$work/node_modules/.bin':\$PATH npm run -s build"
touch "$work/.complete"
rm -rf "$dir"
mv "$work" "$dir"
trap - EXIT
log "built ${PREVIOUS_RELEASE:0:7} into $dir in $((SECONDS - started))s"
