#!/usr/bin/env bash
# Builds, from the Go module proxy, the binaries of the test control plane and caches them
# outside the repo, keyed on their versions:
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok, helm, kubeconform
#
# No binary downloads: Kubernetes is built from a wrapper module that requires
# k8s.io/kubernetes and replaces every k8s.io/<staging> v0.0.0 requirement with the published
# v0.Y.Z; etcd from a wrapper that requires go.etcd.io/etcd/server/v3 (Debian's etcd-server 3.4
# only when that build fails); kwok, helm and kubeconform with a pinned `go install`.
#
# Usage:
#   install.sh               build what is missing (idempotent; one line when the cache is warm)
#   install.sh --print-dir   print the directory holding the binaries (builds nothing)
#   install.sh --print-env   print KEY=VALUE lines: assets dir, versions (builds nothing)
#
# Environment:
#   CONVEYOR_K8S_ASSETS   a directory with all the binaries; used as is, nothing is built
#                         (the role of envtest's KUBEBUILDER_ASSETS)
#   CONVEYOR_CACHE_DIR    cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/conveyor)
# Go's module and build caches stay wherever Go keeps them (GOMODCACHE, GOCACHE).
set -euo pipefail

# ---- pinned versions (the cache key) -----------------------------------------------------
K8S_VERSION=v1.34.4
ETCD_VERSION=v3.5.35
KWOK_VERSION=v0.8.0
HELM_VERSION=v3.22.0
KUBECONFORM_VERSION=v0.7.0

BINARIES=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok helm kubeconform)
K8S_COMMANDS=(kube-apiserver kube-controller-manager kube-scheduler kubectl)

cache_root="${CONVEYOR_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/conveyor}"
key="k8s-${K8S_VERSION}-etcd-${ETCD_VERSION}-kwok-${KWOK_VERSION}-helm-${HELM_VERSION}-kubeconform-${KUBECONFORM_VERSION}"
cache_dir="$cache_root/$key"
assets_dir="${CONVEYOR_K8S_ASSETS:-$cache_dir/bin}"

log() { printf 'controlplane: %s\n' "$*" >&2; }
die() { printf 'controlplane: error: %s\n' "$*" >&2; exit 1; }

case "${1:-}" in
  --print-dir) echo "$assets_dir"; exit 0 ;;
  --print-env)
    cat <<EOF
CONVEYOR_K8S_ASSETS=$assets_dir
K8S_VERSION=$K8S_VERSION
ETCD_VERSION=$ETCD_VERSION
KWOK_VERSION=$KWOK_VERSION
HELM_VERSION=$HELM_VERSION
KUBECONFORM_VERSION=$KUBECONFORM_VERSION
EOF
    exit 0 ;;
  "") ;;
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) die "unknown argument '$1' (try --help)" ;;
esac

missing_in() { # dir -> prints the binaries missing from dir
  local d=$1 b
  for b in "${BINARIES[@]}"; do [ -x "$d/$b" ] || printf '%s ' "$b"; done
}

if [ -n "${CONVEYOR_K8S_ASSETS:-}" ]; then
  miss=$(missing_in "$CONVEYOR_K8S_ASSETS")
  [ -z "$miss" ] || die "CONVEYOR_K8S_ASSETS=$CONVEYOR_K8S_ASSETS lacks: $miss(unset it to build them into $cache_root)"
  log "using CONVEYOR_K8S_ASSETS=$CONVEYOR_K8S_ASSETS"
  exit 0
fi

warm() { [ -f "$cache_dir/.complete" ] && [ -z "$(missing_in "$cache_dir/bin")" ]; }
if warm; then
  log "cached: $cache_dir/bin (kubernetes $K8S_VERSION, etcd $ETCD_VERSION, kwok $KWOK_VERSION, helm $HELM_VERSION, kubeconform $KUBECONFORM_VERSION)"
  exit 0
fi

# ---- cold path ---------------------------------------------------------------------------
mkdir -p "$cache_root"
exec 9>"$cache_root/.install.lock"
if ! flock -n 9; then
  log "another install is running; waiting for it"
  flock 9
  if warm; then log "cached: $cache_dir/bin"; exit 0; fi
fi

export PATH="/usr/local/go/bin:$PATH"
command -v go >/dev/null 2>&1 || die "Go not found (looked in PATH and /usr/local/go/bin); install Go >= 1.24"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false
log "go: $(go version | cut -d' ' -f3-) proxy: $(go env GOPROXY) modcache: $(go env GOMODCACHE)"

# Reachability of the module proxy: one small metadata request, with a deadline.
if ! probe=$(timeout 60 go list -m -json "k8s.io/kubernetes@$K8S_VERSION" 2>&1); then
  die "cannot reach the Go module proxy ($(go env GOPROXY)) for k8s.io/kubernetes@$K8S_VERSION:
$probe
Check network access to the proxy or set GOPROXY to a reachable one."
fi
k8s_date=$(printf '%s\n' "$probe" | sed -n 's/.*"Time": "\([^"]*\)".*/\1/p')
k8s_gomod=$(printf '%s\n' "$probe" | sed -n 's/.*"GoMod": "\([^"]*\)".*/\1/p')
[ -f "$k8s_gomod" ] || die "no go.mod for k8s.io/kubernetes@$K8S_VERSION in the module cache ($k8s_gomod)"

work="$cache_dir.build"
rm -rf "$work"
mkdir -p "$work/bin" "$work/logs"
started=$(date +%s)

fmt_secs() { local s=$1; if [ "$s" -ge 60 ]; then printf '%dm%02ds' $((s / 60)) $((s % 60)); else printf '%ds' "$s"; fi; }

# step <label> <logfile> <command...>: runs a command, shows a heartbeat while it runs, prints
# the tail of its log when it fails.
step() {
  local label=$1 logfile=$2; shift 2
  local t0 pid rc=0 next=30
  t0=$(date +%s)
  log "$label ..."
  "$@" >"$logfile" 2>&1 &
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

# ---- Kubernetes ----------------------------------------------------------------------------
minor_patch=${K8S_VERSION#v1.}           # 34.4
staging_version="v0.${minor_patch}"      # v0.34.4
k8s_major=1
k8s_minor=${minor_patch%%.*}
mkdir -p "$work/src/kubernetes"
{
  echo "// Generated by test/controlplane/install.sh: builds Kubernetes $K8S_VERSION from the module proxy."
  echo "module conveyor.local/controlplane/kubernetes"
  echo
  echo "go $(sed -n 's/^go //p' "$k8s_gomod" | head -1)"
  godebug=$(sed -n 's/^godebug //p' "$k8s_gomod" | head -1)
  [ -n "$godebug" ] && echo "godebug $godebug"
  echo
  echo "require k8s.io/kubernetes $K8S_VERSION"
  echo
  echo "replace ("
  # every staging module that k8s.io/kubernetes requires at v0.0.0 -> the published v0.Y.Z
  sed -n 's/^[[:space:]]*\(k8s\.io\/[A-Za-z0-9._-]*\) v0\.0\.0$/\1/p' "$k8s_gomod" | sort -u |
    while read -r m; do printf '\t%s => %s %s\n' "$m" "$m" "$staging_version"; done
  echo ")"
} >"$work/src/kubernetes/go.mod"
grep -q '=>' "$work/src/kubernetes/go.mod" || die "found no k8s.io/* v0.0.0 requirements in $k8s_gomod"
{
  echo "//go:build tools"
  echo
  echo "// Package tools pins the Kubernetes commands this module builds."
  echo "package tools"
  echo
  echo "import ("
  for c in "${K8S_COMMANDS[@]}"; do echo "	_ \"k8s.io/kubernetes/cmd/$c\""; done
  echo ")"
} >"$work/src/kubernetes/tools.go"

version_ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  version_ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$k8s_major -X $pkg.gitMinor=$k8s_minor"
  version_ldflags+=" -X $pkg.gitCommit=$K8S_VERSION-modproxy -X $pkg.gitTreeState=clean -X $pkg.buildDate=$k8s_date"
done

(
  cd "$work/src/kubernetes"
  step "resolve kubernetes $K8S_VERSION modules (staging -> $staging_version; downloads on a cold module cache)" \
    "$work/logs/kubernetes-mod.log" go mod tidy
  for c in "${K8S_COMMANDS[@]}"; do
    step "build $c $K8S_VERSION" "$work/logs/$c.log" \
      go build -trimpath -ldflags "-s -w$version_ldflags" -o "$work/bin/$c" "k8s.io/kubernetes/cmd/$c"
  done
)

# ---- etcd ------------------------------------------------------------------------------------
mkdir -p "$work/src/etcd"
cat >"$work/src/etcd/go.mod" <<EOF
// Generated by test/controlplane/install.sh: builds etcd $ETCD_VERSION from the module proxy.
module conveyor.local/controlplane/etcd

go 1.24.0

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
EOF
cat >"$work/src/etcd/main.go" <<'EOF'
// Command etcd is etcd's own main (go.etcd.io/etcd/v3 main.go) in a module of its own.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
etcd_ok=1
(
  cd "$work/src/etcd"
  step "resolve etcd $ETCD_VERSION modules" "$work/logs/etcd-mod.log" go mod tidy &&
    step "build etcd $ETCD_VERSION" "$work/logs/etcd.log" go build -trimpath -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_VERSION-modproxy" -o "$work/bin/etcd" .
) || etcd_ok=0
if [ "$etcd_ok" = 0 ]; then
  if [ -x /usr/bin/etcd ] && /usr/bin/etcd --version 2>/dev/null | grep -q 'etcd Version: 3\.4'; then
    log "etcd $ETCD_VERSION did not build; falling back to Debian's $(/usr/bin/etcd --version | head -1)"
    ln -sf /usr/bin/etcd "$work/bin/etcd"
  else
    die "etcd $ETCD_VERSION did not build (see $work/logs/etcd.log); fallback: apt-get install etcd-server (3.4) and rerun"
  fi
fi

# ---- kwok, helm, kubeconform: pinned go install ----------------------------------------------
gi() { GOBIN="$work/bin" go install -trimpath "$@"; }
step "build kwok $KWOK_VERSION" "$work/logs/kwok.log" \
  gi -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
step "build helm $HELM_VERSION" "$work/logs/helm.log" \
  gi -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean" \
  "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
step "build kubeconform $KUBECONFORM_VERSION" "$work/logs/kubeconform.log" \
  gi -ldflags "-s -w -X main.version=$KUBECONFORM_VERSION" "github.com/yannh/kubeconform/cmd/kubeconform@$KUBECONFORM_VERSION"

# ---- check and publish -------------------------------------------------------------------------
miss=$(missing_in "$work/bin")
[ -z "$miss" ] || die "build finished but binaries are missing: $miss"
got=$("$work/bin/kubectl" version --client 2>/dev/null | sed -n 's/^Client Version: //p')
[ "$got" = "$K8S_VERSION" ] || die "kubectl reports '$got', expected $K8S_VERSION (version ldflags)"
cat >"$work/versions.txt" <<EOF
kubernetes $K8S_VERSION
etcd $ETCD_VERSION$([ "$etcd_ok" = 1 ] || echo " (FAILED; Debian fallback used)")
kwok $KWOK_VERSION
helm $HELM_VERSION
kubeconform $KUBECONFORM_VERSION
go $(go env GOVERSION)
built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $(fmt_secs $(( $(date +%s) - started )))
EOF
touch "$work/.complete"
rm -rf "$cache_dir"
mv "$work" "$cache_dir"
log "built in $(fmt_secs $(( $(date +%s) - started ))): $cache_dir/bin ($(du -sh "$cache_dir" | cut -f1))"
