#!/usr/bin/env bash
# Which jobs one cap covers, said where it shows: `ppios-coord status` (text and JSON
# `scope`) and the statistics (`coordinator_scope`): "user" by default (each user's jobs on
# a node have a cap of their own), "group" with a group segment, "site" with Redis,
# "process" when the segment cannot be used. And the group segment an administrator makes
# with `ppios-coord share-group`: owner root, mode 0660, refused to anyone but root and
# over a file that is not such a segment; one cap for two users' jobs (root and nobody in
# group 100). Parts that need root or a second uid are skipped where they cannot run.
# usage: scope_test.sh PPIOS_COORD PROGRAM   (PROGRAM: e2e_errors_ppios, which takes a file)
set -uo pipefail
coord=$1 program=$2
fail() { echo "FAIL: $*"; exit 1; }
dir=$(mktemp -d /tmp/ppios-scope.XXXXXX)
chmod 755 "$dir"
redis_pid=
target=scope-$$
# The segments are removed by ppios-coord, which alone knows their names (a layout
# version, the node secret under $HOME): before $dir, which holds that secret, goes. The
# node-local segment of node+ is removed by a reset through the server, so first.
reset_target() {  # reset_target [-u VAR] ADDRESS TARGET [GROUP]: ppios-coord reset --force
  local unset=(-u PPIOS_SHM_GROUP)
  if [ "$1" = -u ]; then unset+=(-u "$2"); shift 2; fi
  env "${unset[@]}" PPIOS_COORDINATOR="$1" PPIOS_TARGET="$2" ${3:+PPIOS_SHM_GROUP=$3} \
    timeout 10 "$coord" reset --force >/dev/null 2>&1
}
cleanup() {
  if [ -n "$redis_pid" ]; then
    reset_target "node+unix://$dir/r.sock" "$target"
    kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
  fi
  reset_target shm "$target"
  reset_target shm "$target" 100
  reset_target shm "$target-bad"
  # The symlink planted under the predictable name: the name without a node secret.
  reset_target -u HOME shm "$target-bad"
  rm -rf "$dir"
}
trap cleanup EXIT
# The node secret that keys segment names lives under a throwaway home, not the real one.
export HOME=$dir/home
mkdir "$HOME"
unset PPIOS_VERBOSE PPIOS_STATS PPIOS_TRACE PPIOS_SHM_GROUP PPIOS_THRESHOLD PPIOS_MODE
export PPIOS_COORDINATOR=shm PPIOS_TARGET=$target OMPI_MCA_plm=isolated
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
head -c 65536 /dev/urandom >"$dir/in.bin"
json_get() { python3 -c "import json,sys; d=json.load(sys.stdin); print(d$1)"; }
stats_scope() {  # stats_scope NAME [VAR=VALUE...]: runs the program, prints its coordinator_scope
  local name=$1; shift
  env "$@" PPIOS_STATS="$dir/$name.json" timeout 60 "$program" "$dir/in.bin" >/dev/null 2>"$dir/$name.err" ||
    fail "$name: the program failed: $(cat "$dir/$name.err")"
  python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).readline())['coordinator_scope'])" "$dir/$name.json"
}

# 1. The default: per user, and status says what a cap across users needs.
timeout 10 "$coord" set-threshold 2 || fail "set-threshold"
[ "$(timeout 10 "$coord" status --json | json_get "['scope']")" = user ] || fail "status --json: scope is not user"
timeout 10 "$coord" status | grep -q "^scope      user: only uid $(id -u)'s jobs on this node; a cap across users needs the site's coordinator (PPIOS_COORDINATOR=redis://..., or a group segment an administrator makes: ppios-coord share-group GROUP)" ||
  fail "status text: $(timeout 10 "$coord" status)"
[ "$(stats_scope user)" = user ] || fail "statistics: not user: $(cat "$dir/user.json")"
echo "default: scope user in status and statistics"

# 2. A file planted under the predictable name: with a node secret the job uses its keyed
# name (scope user); without one ($HOME unset) the segment cannot be used, the process
# schedules within itself, and the notice says why the name was predictable.
timeout 10 "$coord" reset --force >/dev/null
ln -s /nonexistent "/dev/shm/ppios-coord-v7.$(id -u).$target-bad"
[ "$(stats_scope keyed PPIOS_TARGET="$target-bad")" = user ] || fail "statistics with a node secret: $(cat "$dir/keyed.json")"
[ "$(stats_scope bad -u HOME PPIOS_TARGET="$target-bad")" = process ] || fail "statistics of an unusable segment: $(cat "$dir/bad.json")"
grep -q "not a regular file.*its name is predictable.*HOME is unset" "$dir/bad.json" ||
  fail "no notice of the unusable segment and its predictable name: $(cat "$dir/bad.json")"
rm -f "/dev/shm/ppios-coord-v7.$(id -u).$target-bad"
echo "planted predictable name: no cost with a node secret; without one scope process, with the notice"

# 3. Redis: one cap for the site.
if command -v redis-server >/dev/null; then
  redis-server --port 0 --unixsocket "$dir/r.sock" --save "" --appendonly no --dir "$dir" --logfile "$dir/redis.log" &
  redis_pid=$!
  for _ in $(seq 100); do redis-cli -s "$dir/r.sock" ping 2>/dev/null | grep -q PONG && break; sleep 0.05; done
  for addr in "unix://$dir/r.sock" "node+unix://$dir/r.sock"; do
    [ "$(PPIOS_COORDINATOR=$addr timeout 10 "$coord" status --json | json_get "['scope']")" = site ] || fail "$addr: status scope"
    [ "$(stats_scope redis PPIOS_COORDINATOR="$addr" PPIOS_THRESHOLD=2)" = site ] || fail "$addr: statistics: $(cat "$dir/redis.json")"
  done
  PPIOS_COORDINATOR=unix://$dir/r.sock timeout 10 "$coord" share-group 100 >/dev/null 2>&1 &&
    fail "share-group accepted a redis address"
  echo "redis, node+: scope site in status and statistics"
else
  echo "redis: skipped (no redis-server)"
fi

# 4. The group segment an administrator makes, and one cap for two users.
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null || ! getent group 100 >/dev/null; then
  echo "share-group: skipped (needs root, setpriv and group 100)"
  echo PASS
  exit 0
fi
cp "$coord" "$dir/coord" && chmod 755 "$dir/coord"
as_nobody_in_group() { setpriv --reuid=nobody --regid=nogroup --groups=100 "$@"; }
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
if ! as_nobody "$dir/coord" --help >/dev/null 2>&1; then
  echo "share-group: skipped (cannot run a program as uid nobody here)"
  echo PASS
  exit 0
fi
rc=0; as_nobody_in_group "$dir/coord" share-group 100 >"$dir/sg-nobody.out" 2>&1 || rc=$?
[ $rc -eq 1 ] && grep -q "only root" "$dir/sg-nobody.out" || fail "share-group as a member (exit $rc): $(cat "$dir/sg-nobody.out")"
rc=0; as_nobody "$dir/coord" share-group 100 >"$dir/sg-out.out" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "not a member" "$dir/sg-out.out" || fail "share-group by a non-member (exit $rc): $(cat "$dir/sg-out.out")"
seg=/dev/shm/ppios-coord-v7.g100.$target
# A file already at the name that is not a group segment: refused, and left alone.
head -c 100 /dev/zero >"$seg" && chgrp 100 "$seg" && chmod 666 "$seg"
rc=0; timeout 10 "$coord" share-group 100 >"$dir/sg-bad.out" 2>&1 || rc=$?
[ $rc -eq 1 ] && grep -q "accessible to users outside the group" "$dir/sg-bad.out" || fail "share-group over a bad file (exit $rc): $(cat "$dir/sg-bad.out")"
[ "$(stat -c %s "$seg")" = 100 ] || fail "share-group changed a file it refused"
rm -f "$seg"
timeout 10 "$coord" share-group users --threshold 1 >"$dir/sg.out" 2>&1 || fail "share-group: $(cat "$dir/sg.out")"
grep -q "cap 1 over the jobs of every member of the group on this node that sets PPIOS_SHM_GROUP=100" "$dir/sg.out" ||
  fail "share-group report: $(cat "$dir/sg.out")"
[ "$(stat -c %a:%u:%g "$seg")" = 660:0:100 ] || fail "the group segment is $(stat -c %a:%u:%g "$seg"), not 660 root:100"
export PPIOS_SHM_GROUP=100
[ "$(timeout 10 "$coord" status --json | json_get "['scope'], d['threshold']")" = "group 1" ] || fail "status of the group segment"
[ "$(stats_scope group)" = group ] || fail "statistics in the group: $(cat "$dir/group.json")"
# Two users' jobs at once, PTs holding each slot 2 ms: one cap of 1 over both.
as_nobody_in_group timeout 60 "$dir/coord" bench --clients 2 --seconds 2 --class pt --hold-us 2000 --threshold 1 --json >"$dir/b1.out" 2>"$dir/b1.err" &
b1=$!
timeout 60 "$coord" bench --clients 2 --seconds 2 --class pt --hold-us 2000 --threshold 1 --json >"$dir/b2.out" 2>"$dir/b2.err" &
b2=$!
sleep 0.7
procs=$(timeout 10 "$coord" status --json | json_get "['processes']")
wait $b1 || fail "nobody's bench: $(cat "$dir/b1.err")"
wait $b2 || fail "root's bench: $(cat "$dir/b2.err")"
[ "$procs" -ge 2 ] || fail "the two users' jobs did not share the segment ($procs process(es) registered)"
[ ! -s "$dir/b1.err" ] || fail "nobody's job did not use the group segment: $(cat "$dir/b1.err")"
max=$(timeout 10 "$coord" status --json | json_get "['max_inflight_seen']")
[ "$max" = 1 ] || fail "two users' jobs ran $max accesses at once under the group's cap of 1"
echo "share-group: root:100 660, refused to others and over a bad file; two users' jobs: $procs processes, at most $max in flight at cap 1"
timeout 10 "$coord" reset --force >/dev/null
echo PASS
