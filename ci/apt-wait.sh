#!/usr/bin/env bash
# Wait until no other apt/dpkg process holds the package locks (unattended-upgrades, a second
# ci/setup.sh), bounded: MPIREGRESS_APT_LOCK_WAIT seconds (default 600), saying so once, then exit 3
# with one sentence. apt and dpkg lock with fcntl (lockf), so a lock is "held" when lockf fails.
# MPIREGRESS_APT_LOCKS (space-separated paths) replaces the lock files checked (tests use their own).
set -uo pipefail
limit=${MPIREGRESS_APT_LOCK_WAIT:-600}
locks=${MPIREGRESS_APT_LOCKS:-/var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock /var/cache/apt/archives/lock}
free() {
  python3 - $locks <<'PY'
import fcntl, os, sys
for path in sys.argv[1:]:
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        continue            # absent, or not ours to open (not root): apt's own lock timeout decides
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        sys.exit(1)
    finally:
        os.close(fd)
PY
}
start=$SECONDS
said=0
while ! free; do
  if [ $((SECONDS - start)) -ge "$limit" ]; then
    echo "setup: another apt/dpkg process still holds the package lock after ${limit} s; let it finish" \
         "(or raise MPIREGRESS_APT_LOCK_WAIT) and run ci/setup.sh again" >&2
    exit 3
  fi
  if [ "$said" = 0 ]; then
    echo "setup: another apt/dpkg process holds the package lock; waiting for it (up to ${limit} s)"
    said=1
  fi
  sleep 1
done
exit 0
