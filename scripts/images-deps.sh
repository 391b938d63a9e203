#!/usr/bin/env bash
# Installs what `make images` and the image tests use: podman and buildah (rootful, storage
# under the project's cache), runc (podman's default crun fails on hybrid cgroups), debootstrap
# (the local stand-in for the node base image, no registry being reachable), and for the real node
# (test/support/node.ts) containerd and the CNI plugins (bridge, host-local) under it, runc and
# iptables (the hygiene check reads its rules). Idempotent: installs only what is missing.
set -euo pipefail
need=()
command -v podman >/dev/null || need+=(podman)
command -v buildah >/dev/null || need+=(buildah)
command -v runc >/dev/null || [ -x /usr/sbin/runc ] || need+=(runc)
command -v debootstrap >/dev/null || [ -x /usr/sbin/debootstrap ] || need+=(debootstrap)
command -v containerd >/dev/null || need+=(containerd)
[ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] || need+=(containernetworking-plugins)
command -v iptables-save >/dev/null || [ -x /usr/sbin/iptables-save ] || need+=(iptables)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" -ne 0 ]; then
  echo "images-deps: missing ${need[*]}; run as root or install them: apt-get install -y ${need[*]}" >&2
  exit 1
fi
echo "images-deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# Debian starts the packaged containerd; the node runs its own, in its own directories.
(command -v systemctl >/dev/null && systemctl disable --now containerd >/dev/null 2>&1) || service containerd stop >/dev/null 2>&1 || true
echo "images-deps: done"
