# Sourced by the image scripts: rootful podman/buildah with ALL of their state and settings under
# the project's cache ($CONVEYOR_CONTAINERS, default ~/.cache/conveyor/containers), pointed to by
# CONTAINERS_STORAGE_CONF / CONTAINERS_CONF, so the machine's own container settings stay as
# they are. test/support/containers.ts points podman at the same files for the tests.
CONVEYOR_CONTAINERS="${CONVEYOR_CONTAINERS:-${XDG_CACHE_HOME:-$HOME/.cache}/conveyor/containers}"
mkdir -p "$CONVEYOR_CONTAINERS"
# crun (podman's default) fails on this host's hybrid cgroups: runc. The default rlimits ask for
# more than the host allows: open files at the host's hard limit, processes at 4096 (runc may not
# raise it to the host's hard limit here).
conveyor_ulimits() { # the same limits as podman/buildah flags (containers.conf's are not used by builds)
  local n p
  n="$(ulimit -Hn)"
  p="$(ulimit -Hu)"
  [ "$n" = unlimited ] && n=1048576
  { [ "$p" = unlimited ] || [ "$p" -gt 4096 ]; } && p=4096
  echo "--ulimit nofile=$n:$n --ulimit nproc=$p:$p"
}
_conveyor_containers_conf() {
  cat <<CONF
# written by images/containers.sh
[containers]
default_ulimits = [$(conveyor_ulimits | sed 's/^--ulimit \(.*\) --ulimit \(.*\)$/"\1", "\2"/')]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
tmp_dir = "$CONVEYOR_CONTAINERS/tmp"
CONF
}
_conveyor_storage_conf() {
  cat <<CONF
# written by images/containers.sh
[storage]
driver = "overlay"
graphroot = "$CONVEYOR_CONTAINERS/storage"
runroot = "$CONVEYOR_CONTAINERS/run"
CONF
}
_conveyor_write_if_changed() { # file, content
  if [ ! -f "$1" ] || [ "$(cat "$1")" != "$2" ]; then printf '%s\n' "$2" >"$1.tmp" && mv "$1.tmp" "$1"; fi
}
_conveyor_write_if_changed "$CONVEYOR_CONTAINERS/containers.conf" "$(_conveyor_containers_conf)"
_conveyor_write_if_changed "$CONVEYOR_CONTAINERS/storage.conf" "$(_conveyor_storage_conf)"
export CONTAINERS_CONF="$CONVEYOR_CONTAINERS/containers.conf"
export CONTAINERS_STORAGE_CONF="$CONVEYOR_CONTAINERS/storage.conf"
