#!/usr/bin/env bash
# Removes what a real node (test/support/node.ts) left on the host: its processes, its bridge,
# its cgroups and its directory. Used by stop(), by the watchdog when the test process dies, and by
# the next start for runs killed half-way. Reads <dir>/state (KEY=VALUE: PGID, BRIDGE, CGROUP).
#   cleanup.sh <run dir>
set -uo pipefail
dir=$1
[ -f "$dir/state" ] || { rm -rf "$dir"; exit 0; }
PGID="" BRIDGE="" CGROUP=""
# shellcheck disable=SC1091
source "$dir/state"
if [ -n "$PGID" ] && kill -0 -- "-$PGID" 2>/dev/null; then
  kill -TERM -- "-$PGID" 2>/dev/null
  for _ in $(seq 1 150); do kill -0 -- "-$PGID" 2>/dev/null || break; sleep 0.2; done
  kill -KILL -- "-$PGID" 2>/dev/null
fi
# Processes that left the group: container shims (same mount namespace) and containers (the
# node's cgroups).
mntns=$(cat "$dir/mntns" 2>/dev/null)
for _ in 1 2 3 4 5; do
  pids=""
  if [ -n "$mntns" ]; then
    for p in /proc/[0-9]*; do
      [ "$(readlink "$p/ns/mnt" 2>/dev/null)" = "$mntns" ] && pids+=" ${p#/proc/}"
    done
  fi
  [ -z "$CGROUP" ] || pids+=" $(find /sys/fs/cgroup/*/"$CGROUP" -name cgroup.procs -exec cat {} + 2>/dev/null | tr '\n' ' ')"
  [ -n "${pids// /}" ] || break
  # shellcheck disable=SC2086
  kill -KILL $pids 2>/dev/null
  sleep 0.2
done
if [ -n "$CGROUP" ]; then
  # depth first: a cgroup goes only once its children have
  for root in /sys/fs/cgroup/*/"$CGROUP"; do
    [ -d "$root" ] && find "$root" -depth -type d -exec rmdir {} + 2>/dev/null
  done
fi
[ -z "$BRIDGE" ] || ! ip link show "$BRIDGE" >/dev/null 2>&1 || ip link del "$BRIDGE"
rm -rf "$dir"
