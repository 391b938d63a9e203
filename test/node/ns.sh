#!/usr/bin/env bash
# The real node's processes, containerd and the kubelet, in a mount namespace of their own
# (test/support/node.ts starts it as `unshare --mount --propagation private --fork bash ns.sh <dir>`):
# what they mount (container root filesystems, pod network namespaces, secret volumes) and the host
# files they would change stay in this namespace and vanish with it.
#   <dir>/containerd.toml, <dir>/kubelet.yaml, <dir>/kubelet.args (one flag a line), <dir>/pause.tar
# SIGTERM stops the kubelet, then containerd; test/node/cleanup.sh ends what they left (the
# namespace's id is in <dir>/mntns).
set -euo pipefail
dir=$1
log() { printf 'node: %s\n' "$*" >&2; }
readlink /proc/$$/ns/mnt >"$dir/mntns"

# The kubelet sets these sysctls at start (protectKernelDefaults: false); each is pinned here to
# a private copy of its current value, so its writes change nothing on the host.
mkdir -p "$dir/sysctl"
for key in vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops \
  kernel/keys/root_maxkeys kernel/keys/root_maxbytes; do
  copy="$dir/sysctl/${key//\//.}"
  cat "/proc/sys/$key" >"$copy"
  mount --bind "$copy" "/proc/sys/$key"
done
# containerd's shim sockets (/run/containerd/s), the pod network namespaces (/run/netns) and the
# kubelet's /var/log/containers links are fixed paths: private empty directories here.
mount -t tmpfs -o mode=0755 conveyor-node-run /run
mount -t tmpfs -o mode=0755 conveyor-node-log /var/log

containerd --config "$dir/containerd.toml" >>"$dir/logs/containerd.log" 2>&1 &
containerd_pid=$!
kubelet_pid=""
stop() {
  trap - TERM INT
  [ -z "$kubelet_pid" ] || kill -TERM "$kubelet_pid" 2>/dev/null || true
  wait "$kubelet_pid" 2>/dev/null || true
  kill -TERM "$containerd_pid" 2>/dev/null || true
  wait "$containerd_pid" 2>/dev/null || true
  exit 0
}
trap stop TERM INT

for _ in $(seq 1 600); do
  [ -S "$dir/containerd.sock" ] && ctr --address "$dir/containerd.sock" version >/dev/null 2>&1 && break
  kill -0 "$containerd_pid" 2>/dev/null || { log "containerd exited; see $dir/logs/containerd.log"; exit 1; }
  sleep 0.1
done
ctr --address "$dir/containerd.sock" -n k8s.io images import "$dir/pause.tar" >>"$dir/logs/containerd.log" 2>&1 ||
  { log "importing the pause image failed; see $dir/logs/containerd.log"; exit 1; }
mapfile -t kubelet_args <"$dir/kubelet.args"
kubelet "${kubelet_args[@]}" >>"$dir/logs/kubelet.log" 2>&1 &
kubelet_pid=$!
# the node is up while both run; either one exiting stops the other
wait -n "$containerd_pid" "$kubelet_pid" || true
log "$( kill -0 "$kubelet_pid" 2>/dev/null && echo containerd || echo kubelet) exited; see $dir/logs"
stop
