# Sourced by the scripts that build test binaries from the Go module proxy into a versioned cache
# outside the repo (test/controlplane/install.sh, test/observability/install.sh): the cache layout,
# the warm-cache and prebuilt-assets short cuts, one build at a time, progress lines and clear errors.
#
# The sourcing script sets, before calling anything here:
#   GOBUILD_NAME       prefix of every log line (and of the lock file)
#   GOBUILD_KEY        the cache key: the pinned versions
#   GOBUILD_ASSETS     name of the variable that points at prebuilt binaries (e.g. CONVEYOR_K8S_ASSETS)
#   BINARIES           array of the binaries the cache must hold
# and calls: gobuild_init; gobuild_args "$@"; gobuild_use_cached "<summary>"; gobuild_start <min go>
# <module@version> (sets $probe, $work, $started); step …; gobuild_check_built; its own checks;
# gobuild_publish "<versions.txt lines>".
# The builds run under `nice -n 10`; Go's module and build caches stay where Go keeps them.

log() { printf '%s: %s\n' "$GOBUILD_NAME" "$*" >&2; }
die() {
  printf '%s: error: %s\n' "$GOBUILD_NAME" "$*" >&2
  exit 1
}

# Sets cache_root, cache_dir (the finished cache) and assets_dir (where the binaries are used from).
gobuild_init() {
  cache_root="${CONVEYOR_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/conveyor}"
  cache_dir="$cache_root/$GOBUILD_KEY"
  assets_dir="${!GOBUILD_ASSETS:-$cache_dir/bin}"
}

# The options every such script takes; the caller handles its own first.
gobuild_args() {
  case "${1:-}" in
    --print-dir) echo "$assets_dir"; exit 0 ;;
    "") ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (try --help)" ;;
  esac
}

missing_in() { # dir -> prints the binaries missing from dir
  local d=$1 b
  for b in "${BINARIES[@]}"; do [ -x "$d/$b" ] || printf '%s ' "$b"; done
}

gobuild_warm() { [ -f "$cache_dir/.complete" ] && [ -z "$(missing_in "$cache_dir/bin")" ]; }

# Exits 0 when the prebuilt assets or a complete cache are there (one line: <summary> says what).
gobuild_use_cached() {
  local summary=$1 given=${!GOBUILD_ASSETS:-} miss
  if [ -n "$given" ]; then
    miss=$(missing_in "$given")
    [ -z "$miss" ] || die "$GOBUILD_ASSETS=$given lacks: $miss(unset it to build them into $cache_root)"
    log "using $GOBUILD_ASSETS=$given"
    exit 0
  fi
  if gobuild_warm; then
    log "cached: $cache_dir/bin ($summary)"
    exit 0
  fi
}

# Cold path: one build at a time (a waiting one uses what the other built), Go on PATH, the module
# proxy reachable (probe = `go list -m -json <module@version>`), a fresh work dir ($work).
gobuild_start() {
  local min_go=$1 module=$2
  mkdir -p "$cache_root"
  exec 9>"$cache_root/.install-$GOBUILD_NAME.lock"
  if ! flock -n 9; then
    log "another install is running; waiting for it"
    flock 9
    if gobuild_warm; then log "cached: $cache_dir/bin"; exit 0; fi
  fi

  export PATH="/usr/local/go/bin:$PATH"
  command -v go >/dev/null 2>&1 || die "Go not found (looked in PATH and /usr/local/go/bin); install Go >= $min_go"
  export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false
  log "go: $(go version | cut -d' ' -f3-) proxy: $(go env GOPROXY) modcache: $(go env GOMODCACHE)"

  if ! probe=$(timeout 60 go list -m -json "$module" 2>&1); then
    die "cannot reach the Go module proxy ($(go env GOPROXY)) for $module:
$probe
Check network access to the proxy or set GOPROXY to a reachable one."
  fi

  work="$cache_dir.build"
  rm -rf "$work"
  mkdir -p "$work/bin" "$work/logs" "$work/src"
  started=$(date +%s)
}

fmt_secs() { local s=$1; if [ "$s" -ge 60 ]; then printf '%dm%02ds' $((s / 60)) $((s % 60)); else printf '%ds' "$s"; fi; }

# step <label> <logfile> <command...>: runs a command niced, shows a heartbeat while it runs,
# prints the tail of its log when it fails.
step() {
  local label=$1 logfile=$2; shift 2
  local t0 pid rc=0 next=30
  t0=$(date +%s)
  log "$label ..."
  nice -n 10 "$@" >"$logfile" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    local el=$(( $(date +%s) - t0 ))
    if [ "$el" -ge "$next" ]; then log "  $label: $(fmt_secs "$el") (total $(fmt_secs $(( $(date +%s) - started ))))"; next=$((next + 30)); fi
  done
  wait "$pid" || rc=$?
  if [ "$rc" -ne 0 ]; then
    log "$label FAILED after $(fmt_secs $(( $(date +%s) - t0 ))); last lines of $logfile:"
    tail -n 40 "$logfile" >&2
    return "$rc"
  fi
  log "$label done in $(fmt_secs $(( $(date +%s) - t0 )))"
}

gobuild_check_built() {
  local miss
  miss=$(missing_in "$work/bin")
  [ -z "$miss" ] || die "build finished but binaries are missing: $miss"
}

# Writes versions.txt (<lines>, the Go version, when and how long) and moves the work dir into
# place as the complete cache.
gobuild_publish() {
  local lines=$1
  printf '%s\ngo %s\nbuilt %s in %s\n' "$lines" "$(go env GOVERSION)" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    "$(fmt_secs $(( $(date +%s) - started )))" >"$work/versions.txt"
  touch "$work/.complete"
  rm -rf "$cache_dir"
  mv "$work" "$cache_dir"
  log "built in $(fmt_secs $(( $(date +%s) - started ))): $cache_dir/bin ($(du -sh "$cache_dir" | cut -f1))"
}

# k8s_version_ldflags <version vX.Y.Z> <build date>: the -X flags that make a Kubernetes command
# built from the module proxy report its version (kubectl version, kubelet --version, /version).
k8s_version_ldflags() {
  local v=$1 date=$2 minor pkg out=""
  minor=${v#v1.}
  minor=${minor%%.*}
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    out+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    out+=" -X $pkg.gitCommit=$v-modproxy -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date"
  done
  printf '%s' "$out"
}
