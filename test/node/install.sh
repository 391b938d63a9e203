#!/usr/bin/env bash
# Builds what a real node needs beside Debian's containerd, runc and CNI plugins
# (scripts/node-deps.sh installs those), into a versioned cache outside the repo:
#   kubelet     from the control plane's own wrapper module (test/controlplane/install.sh), so it is
#               the same Kubernetes version, built with the same flags and Go build cache
#   pause.tar   the pod sandbox image: a tiny static program that waits for SIGTERM, packed as an
#               image archive for `ctr images import` (no registry is reachable here)
#
# Usage:
#   install.sh               build what is missing (idempotent; one line when the cache is warm)
#   install.sh --print-dir   print the directory holding kubelet, pause and pause.tar (builds nothing)
#
# Environment:
#   CONVEYOR_NODE_ASSETS   a directory with kubelet, pause and pause.tar; used as is, nothing is built
#   CONVEYOR_CACHE_DIR     cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/conveyor)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cp_install="$here/../controlplane/install.sh"
K8S_VERSION=$(bash "$cp_install" --print-env | sed -n 's/^K8S_VERSION=//p')
# The image name containerd's sandbox_image names (test/support/node.ts writes the config).
PAUSE_IMAGE=localhost/conveyor-pause:1

BINARIES=(kubelet pause) # and pause.tar, the image made of pause
GOBUILD_NAME=node
GOBUILD_KEY="kubelet-${K8S_VERSION}-pause-1"
GOBUILD_ASSETS=CONVEYOR_NODE_ASSETS
source "$here/../../scripts/lib/gobuild.sh"
gobuild_init
gobuild_args "$@"
gobuild_use_cached "kubelet $K8S_VERSION, $PAUSE_IMAGE"

# The control plane's wrapper module (go.mod with the staging replaces) lives beside its binaries.
cp_src="$(dirname "$(bash "$cp_install" --print-dir)")/src/kubernetes"
[ -f "$cp_src/go.mod" ] ||
  die "no control plane wrapper module at $cp_src: run 'make controlplane' first (with CONVEYOR_K8S_ASSETS set, unset it so the control plane is built here)"

gobuild_start 1.24 "k8s.io/kubernetes@$K8S_VERSION"
mkdir -p "$work/src/kubernetes" "$work/src/pause" "$work/image/rootfs"
cp "$cp_src/go.mod" "$cp_src/go.sum" "$work/src/kubernetes/"
cat >"$work/src/kubernetes/tools.go" <<GO
//go:build tools

// Package tools pins the Kubernetes command this module builds.
package tools

import _ "k8s.io/kubernetes/cmd/kubelet"
GO
version_ldflags=$(k8s_version_ldflags "$K8S_VERSION" "$(printf '%s\n' "$probe" | sed -n 's/.*"Time": "\([^"]*\)".*/\1/p')")
(
  cd "$work/src/kubernetes"
  step "resolve kubelet $K8S_VERSION modules (downloads on a cold module cache)" "$work/logs/kubelet-mod.log" go mod tidy
  step "build kubelet $K8S_VERSION" "$work/logs/kubelet.log" \
    go build -trimpath -ldflags "-s -w$version_ldflags" -o "$work/bin/kubelet" k8s.io/kubernetes/cmd/kubelet
)

# ---- the pause image: PID 1 of every pod sandbox; it reaps nothing (no shared PID namespace here)
cat >"$work/src/pause/go.mod" <<GO
module conveyor.local/node/pause

go 1.24.0
GO
cat >"$work/src/pause/main.go" <<'GO'
// Command pause holds a pod sandbox's namespaces open until the runtime stops it.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
}
GO
(cd "$work/src/pause" && step "build pause" "$work/logs/pause.log" go build -trimpath -ldflags "-s -w" -o "$work/bin/pause" .)
cp "$work/bin/pause" "$work/image/rootfs/pause"
# A `docker save` archive (what `ctr images import` reads): one layer with /pause, its config,
# manifest.json naming the image.
(
  cd "$work/image"
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C rootfs -cf layer.tar pause
  diff_id=$(sha256sum layer.tar | cut -d' ' -f1)
  printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/pause"],"User":"65535:65535"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$diff_id" >config.json
  config_id=$(sha256sum config.json | cut -d' ' -f1)
  mv config.json "$config_id.json"
  printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["layer.tar"]}]' "$config_id" "$PAUSE_IMAGE" >manifest.json
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$work/bin/pause.tar" manifest.json "$config_id.json" layer.tar
)
rm -rf "$work/image"

gobuild_check_built
[ -s "$work/bin/pause.tar" ] || die "pause.tar was not written"
got=$("$work/bin/kubelet" --version 2>/dev/null)
[ "$got" = "Kubernetes $K8S_VERSION" ] || die "kubelet reports '$got', expected Kubernetes $K8S_VERSION (version ldflags)"
gobuild_publish "kubelet $K8S_VERSION
pause image $PAUSE_IMAGE"
