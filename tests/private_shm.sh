# Sourced by a test script that must not share the machine's /dev/shm: one that runs
# `ppios-coord gc` as root (it removes every segment no process maps, other tests' too,
# and another test's gc would remove the files this one planted), or one that fills
# /dev/shm. It runs the script again in a private mount namespace, with a tmpfs of its
# own over /dev/shm, sticky and writable by all like the real one. The tmpfs goes away
# with the namespace, when the script's last process ends.
#
#   . "$(dirname "$0")/<...>/tests/private_shm.sh"
#   private_shm SIZE required|optional "$0" "$@"
#
# required: where no private /dev/shm can be had (not root, unshare or mount refused),
#           the script exits 77 (SKIP);
# optional: there it runs on the machine's /dev/shm.
# Returns in the script's new process, with the private /dev/shm mounted (or, optional,
# in the same process without one).
private_shm() {
  local size=$1 need=$2 script=$3
  shift 3
  local why=
  if [ "${PPIOS_PRIVATE_SHM_INSIDE:-}" != 1 ]; then
    if [ "$(id -u)" != 0 ]; then
      why="not root: cannot mount a tmpfs in a mount namespace"
    elif ! unshare -m --propagation private true 2>/dev/null; then
      why="unshare -m is not allowed here"
    else
      exec unshare -m --propagation private env PPIOS_PRIVATE_SHM_INSIDE=1 "$script" "$@"
    fi
  else
    # Not passed on: a test script this one starts decides for itself.
    unset PPIOS_PRIVATE_SHM_INSIDE
    mount -t tmpfs -o "size=$size,mode=1777" ppios-test-shm /dev/shm && return 0
    why="cannot mount a tmpfs on /dev/shm"
  fi
  if [ "$need" = required ]; then
    echo "SKIP: $why"
    exit 77
  fi
  echo "note: $why; running on the machine's /dev/shm"
}
