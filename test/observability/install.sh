#!/usr/bin/env bash
# Builds, from the Go module proxy, the programs the observability tests run against and caches
# them outside the repo, keyed on their versions:
#   prometheus, promtool    github.com/prometheus/prometheus (only static/file service discovery:
#                           -tags remove_all_sd; the web UI is not embedded, the HTTP API is whole)
#   otelcol-conveyor        an OpenTelemetry Collector made by the collector's own builder
#                           (go.opentelemetry.io/collector/cmd/builder) from core components only:
#                           the OTLP receiver, the batch processor, the OTLP/HTTP exporter (a test
#                           receives what the collector forwards as OTLP JSON) and the debug
#                           exporter. (Contrib's file exporter needs modules the proxy lacks.)
#
# Usage:
#   install.sh               build what is missing (idempotent; one line when the cache is warm)
#   install.sh --print-dir   print the directory holding the binaries (builds nothing)
#
# Environment:
#   CONVEYOR_OBS_ASSETS   a directory with all the binaries; used as is, nothing is built
#   CONVEYOR_CACHE_DIR    cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/conveyor)
# The builds run under `nice -n 10`; Go's module and build caches stay where Go keeps them.
set -euo pipefail

# ---- pinned versions (the cache key) -----------------------------------------------------
PROMETHEUS_VERSION=v0.316.0 # the Go module version of the Prometheus 3.x release line
OTELCOL_VERSION=v0.165.0    # collector builder and core components

BINARIES=(prometheus promtool otelcol-conveyor)

cache_root="${CONVEYOR_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/conveyor}"
key="observability-prometheus-${PROMETHEUS_VERSION}-otelcol-${OTELCOL_VERSION}"
cache_dir="$cache_root/$key"
assets_dir="${CONVEYOR_OBS_ASSETS:-$cache_dir/bin}"

log() { printf 'observability: %s\n' "$*" >&2; }
die() { printf 'observability: error: %s\n' "$*" >&2; exit 1; }

case "${1:-}" in
  --print-dir) echo "$assets_dir"; exit 0 ;;
  "") ;;
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) die "unknown argument '$1' (try --help)" ;;
esac

missing_in() { # dir -> prints the binaries missing from dir
  local d=$1 b
  for b in "${BINARIES[@]}"; do [ -x "$d/$b" ] || printf '%s ' "$b"; done
}

if [ -n "${CONVEYOR_OBS_ASSETS:-}" ]; then
  miss=$(missing_in "$CONVEYOR_OBS_ASSETS")
  [ -z "$miss" ] || die "CONVEYOR_OBS_ASSETS=$CONVEYOR_OBS_ASSETS lacks: $miss(unset it to build them into $cache_root)"
  log "using CONVEYOR_OBS_ASSETS=$CONVEYOR_OBS_ASSETS"
  exit 0
fi

warm() { [ -f "$cache_dir/.complete" ] && [ -z "$(missing_in "$cache_dir/bin")" ]; }
if warm; then
  log "cached: $cache_dir/bin (prometheus $PROMETHEUS_VERSION, otelcol $OTELCOL_VERSION)"
  exit 0
fi

# ---- cold path ---------------------------------------------------------------------------
mkdir -p "$cache_root"
exec 9>"$cache_root/.install-observability.lock"
if ! flock -n 9; then
  log "another install is running; waiting for it"
  flock 9
  if warm; then log "cached: $cache_dir/bin"; exit 0; fi
fi

export PATH="/usr/local/go/bin:$PATH"
command -v go >/dev/null 2>&1 || die "Go not found (looked in PATH and /usr/local/go/bin); install Go >= 1.26"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false
log "go: $(go version | cut -d' ' -f3-) proxy: $(go env GOPROXY) modcache: $(go env GOMODCACHE)"

if ! probe=$(timeout 60 go list -m -json "github.com/prometheus/prometheus@$PROMETHEUS_VERSION" 2>&1); then
  die "cannot reach the Go module proxy ($(go env GOPROXY)) for github.com/prometheus/prometheus@$PROMETHEUS_VERSION:
$probe
Check network access to the proxy or set GOPROXY to a reachable one."
fi
prom_date=$(printf '%s\n' "$probe" | sed -n 's/.*"Time": "\([^"]*\)".*/\1/p')

work="$cache_dir.build"
rm -rf "$work"
mkdir -p "$work/bin" "$work/logs" "$work/tools" "$work/src"
started=$(date +%s)

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

# ---- Prometheus + promtool -----------------------------------------------------------------
pv="github.com/prometheus/common/version"
prom_minor=${PROMETHEUS_VERSION#v0.}; prom_minor=${prom_minor%%.*} # v0.316.0 -> 316: Prometheus 3.16
prom_release="$((prom_minor / 100)).$((prom_minor % 100)).${PROMETHEUS_VERSION##*.}"
prom_ldflags="-s -w -X $pv.Version=$prom_release -X $pv.Revision=$PROMETHEUS_VERSION-modproxy -X $pv.Branch=modproxy -X $pv.BuildDate=$prom_date"
step "build prometheus $PROMETHEUS_VERSION" "$work/logs/prometheus.log" \
  env GOBIN="$work/bin" go install -trimpath -tags remove_all_sd -ldflags "$prom_ldflags" "github.com/prometheus/prometheus/cmd/prometheus@$PROMETHEUS_VERSION"
step "build promtool $PROMETHEUS_VERSION" "$work/logs/promtool.log" \
  env GOBIN="$work/bin" go install -trimpath -tags remove_all_sd -ldflags "$prom_ldflags" "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION"

# ---- OpenTelemetry Collector (builder) -------------------------------------------------------
step "build the collector builder $OTELCOL_VERSION" "$work/logs/builder.log" \
  env GOBIN="$work/tools" go install -trimpath "go.opentelemetry.io/collector/cmd/builder@$OTELCOL_VERSION"
cat >"$work/otelcol-builder.yaml" <<EOF
# Generated by test/observability/install.sh
dist:
  name: otelcol-conveyor
  description: OpenTelemetry Collector for the Conveyor observability tests
  output_path: $work/src/otelcol
  version: ${OTELCOL_VERSION#v}
receivers:
  - gomod: go.opentelemetry.io/collector/receiver/otlpreceiver $OTELCOL_VERSION
processors:
  - gomod: go.opentelemetry.io/collector/processor/batchprocessor $OTELCOL_VERSION
exporters:
  - gomod: go.opentelemetry.io/collector/exporter/debugexporter $OTELCOL_VERSION
  - gomod: go.opentelemetry.io/collector/exporter/otlphttpexporter $OTELCOL_VERSION
EOF
step "build otelcol-conveyor $OTELCOL_VERSION (builder: generate, resolve modules, compile)" "$work/logs/otelcol.log" \
  "$work/tools/builder" --config "$work/otelcol-builder.yaml"
cp "$work/src/otelcol/otelcol-conveyor" "$work/bin/otelcol-conveyor"

# ---- check and publish -------------------------------------------------------------------------
miss=$(missing_in "$work/bin")
[ -z "$miss" ] || die "build finished but binaries are missing: $miss"
"$work/bin/promtool" --version >/dev/null 2>&1 || die "promtool does not run"
"$work/bin/otelcol-conveyor" --version >/dev/null 2>&1 || die "otelcol-conveyor does not run"
cat >"$work/versions.txt" <<EOF
prometheus $PROMETHEUS_VERSION ($prom_release)
otelcol $OTELCOL_VERSION (otlp receiver, batch processor, otlphttp + debug exporters)
go $(go env GOVERSION)
built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $(fmt_secs $(( $(date +%s) - started )))
EOF
touch "$work/.complete"
rm -rf "$cache_dir"
mv "$work" "$cache_dir"
log "built in $(fmt_secs $(( $(date +%s) - started ))): $cache_dir/bin ($(du -sh "$cache_dir" | cut -f1))"
