#!/usr/bin/env bash
# Two separate mpirun jobs with the same target must share one cap.
# usage: mpi_two_jobs.sh shm|redis|node PROGRAM PPIOS_COORD MPIRUN [MPIRUN_FLAGS...]
# node: the two-level backend, each job a simulated node of its own (PPIOS_SIM_NODE).
set -euo pipefail
backend=$1 program=$2 coord=$3 mpirun=$4
shift 4
mpirun_flags=("$@")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
threshold=2
target="mpi2jobs-$$"
dir=$(mktemp -d /tmp/ppios-mpi2jobs.XXXXXX)
coordinator=shm

redis_pid=
# The segments a failed job left are removed by ppios-coord, which alone knows their names
# (layout version, node secret). node: resetting the target through the server also
# removes the node-local segments of the nodes it still lists, so it goes first.
cleanup() {
  if [ "$backend" = node ] && [ -n "$redis_pid" ]; then
    timeout 30 "$coord" --coordinator "$coordinator" --target "$target" reset --force >/dev/null 2>&1 || true
  fi
  timeout 30 "$coord" --coordinator shm --target "$target" reset --force >/dev/null 2>&1 || true
  if [ -n "$redis_pid" ]; then kill -9 "$redis_pid" 2>/dev/null || true; wait "$redis_pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT

if [ "$backend" = redis ] || [ "$backend" = node ]; then
  # Not daemonized: as our child it is reaped by `wait` in cleanup, never left as a zombie.
  redis-server --port 0 --unixsocket "$dir/r.sock" --save "" --appendonly no --dir "$dir" \
    --daemonize no --logfile "$dir/r.log" &
  redis_pid=$!
  for _ in $(seq 100); do
    redis-cli -s "$dir/r.sock" ping 2>/dev/null | grep -q PONG && break
    sleep 0.05
  done
  coordinator="unix://$dir/r.sock"
  [ "$backend" = node ] && coordinator="node+$coordinator"
fi

# Counters shared by every rank of both jobs (zero-filled: inflight, max, grants).
head -c 4096 /dev/zero >"$dir/counters"

# Two mpiruns started at once race to create one session directory and one fails:
# each job gets its own.
run_job() {
  mkdir -p "$dir/ompi-$1"
  OMPI_MCA_orte_tmpdir_base="$dir/ompi-$1" PPIOS_SIM_NODE="$([ "$backend" = node ] && echo "job$1")" timeout 60 "$mpirun" "${mpirun_flags[@]}" -np 2 \
    "$program" "$coordinator" "$target" "$threshold" "$dir/counters" 2 >"$dir/job$1.out" 2>&1
}
run_job a & a=$!
run_job b & b=$!
status=0
wait $a || { echo "job a failed:"; cat "$dir/joba.out"; status=1; }
wait $b || { echo "job b failed:"; cat "$dir/jobb.out"; status=1; }
[ $status -eq 0 ] || exit 1

max=$(od -An -t d4 -j 4 -N 4 "$dir/counters" | tr -d ' ')
grants_a=$(awk '/job grants/ {print $3}' "$dir/joba.out")
grants_b=$(awk '/job grants/ {print $3}' "$dir/jobb.out")
echo "backend $backend: job a $grants_a grants, job b $grants_b grants, max in flight across both jobs $max (threshold $threshold)"
[ -n "$grants_a" ] && [ -n "$grants_b" ] && [ "$grants_a" -gt 10 ] && [ "$grants_b" -gt 10 ] || { echo "FAIL: a job did no work"; exit 1; }
[ "$max" -le "$threshold" ] || { echo "FAIL: the two jobs together exceeded the cap"; exit 1; }
[ "$max" -eq "$threshold" ] || { echo "FAIL: the cap was never reached, so the test proves nothing"; exit 1; }
if [ "$backend" = redis ]; then
  # The jobs went through the server, not the node-local stand-in.
  seen=$(redis-cli -s "$dir/r.sock" hget "ppios:{$target}:state" maxseen)
  [ "$seen" = "$threshold" ] || { echo "FAIL: the server saw max $seen in flight"; exit 1; }
fi
echo PASS
