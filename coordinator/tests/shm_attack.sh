#!/usr/bin/env bash
# An unprivileged local user (uid nobody) attacks another user's node-local segment; the
# victim's jobs (ppios-coord bench processes) must neither stall beyond the lease, crash,
# exit with an error, nor write through a planted symlink.
#   private segment (default): the attacker cannot open it at all;
#   squatting the victim's predictable name first: costs nothing while the victim has a
#   node secret (keyed names); without one (a file, or a symlink) the job runs on (warning);
#   shared with a group (PPIOS_SHM_GROUP) the attacker belongs to: holding the lock and
#   forging counters cost the victim at most the lease and a wrong cap.
# Needs root to switch to nobody; exits 77 (SKIP) where no second uid can be used.
# Runs in a private mount namespace with a /dev/shm of its own: root's `gc` here would
# remove other tests' segments, and another test's root `gc` would remove the files
# planted here (the squatter's, the malformed one) while this test looks at them.
# usage: shm_attack.sh PPIOS_COORD ATTACK_TOOL
set -uo pipefail
coord=$1 tool_src=$2
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "not root: cannot run an attacker as another uid"
# The /dev/shm of its own (above), sticky like the real one: only a file's owner or root removes it.
. "$(dirname "$0")/../../tests/private_shm.sh"
private_shm 64m required "$0" "$@"
target="attack-$$"
dir=$(mktemp -d /tmp/ppios-attack.XXXXXX)
chmod 755 "$dir"
pids=()
# What is left in the private /dev/shm goes with it.
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

[ "$(id -u)" = 0 ] || skip "not root: cannot run an attacker as another uid"
command -v setpriv >/dev/null || skip "setpriv not found"
# The attacker's copy of the tool, where nobody can run it.
cp "$tool_src" "$dir/attack" && chmod 755 "$dir/attack"
cp "$coord" "$dir/coord" && chmod 755 "$dir/coord"
# Node secrets under throwaway homes, never the real ~/.ppios: the victim's (root's) here,
# nobody's in a home of its own where a part needs one.
export HOME=$dir/home
mkdir -p "$HOME" "$dir/nobody-home" && chown nobody "$dir/nobody-home"
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
as_nobody_in_group() { setpriv --reuid=nobody --regid=nogroup --groups=100 "$@"; }
as_nobody "$dir/attack" x -1 fuzz 0 >/dev/null 2>&1
[ $? -eq 1 ] || skip "cannot run a program as uid nobody here"

export PPIOS_COORDINATOR=shm PPIOS_LEASE_MS=500
run_job() {  # run_job NAME: a 1 s job of the victim; must end by itself with 0 (or 3: cap exceeded)
  local rc=0
  timeout 60 "$coord" bench --clients 3 --seconds 1 --class mix --json >"$dir/$1.out" 2>"$dir/$1.err" || rc=$?
  case $rc in
    0|3) ;;
    124) fail "$1: the victim's job hung; stderr: $(cat "$dir/$1.err")" ;;
    *) fail "$1: the victim's job exited $rc; stderr: $(cat "$dir/$1.err")" ;;
  esac
}

# 1. Private by default: owned by the victim, mode 0600, and the attacker cannot open it.
export PPIOS_TARGET=$target-private
timeout 10 "$coord" set-threshold 2 || fail "set-threshold"
seg=$(ls /dev/shm/ppios-coord-v7.0."$PPIOS_TARGET".*)
[[ $seg =~ \.[0-9a-f]{16}$ ]] || fail "segment $seg has no keyed name"
[ "$(stat -c %a:%u "$seg")" = 600:0 ] || fail "segment $seg is $(stat -c %a:%u "$seg"), not 600 owned by root"
as_nobody "$dir/attack" "$PPIOS_TARGET" -1 hold 10000 2>"$dir/open.err"
rc=$?
[ $rc -eq 1 ] && grep -q "Permission denied\|does not exist" "$dir/open.err" ||
  fail "the attacker opened the private segment (exit $rc): $(cat "$dir/open.err")"
run_job private
echo "private: mode 600, keyed name, the attacker cannot open it"

# 2. Squatting the victim's predictable name before any job. With a node secret the
# victim's jobs use the keyed name: no warning, a cap, and reset says what is there.
export PPIOS_TARGET=$target-squat
squatted=$(VICTIM_UID=0 as_nobody "$dir/attack" "$PPIOS_TARGET" -1 squat -) || fail "could not squat as nobody"
[ "$squatted" = "/dev/shm/ppios-coord-v7.0.$PPIOS_TARGET" ] || fail "squatted $squatted"
timeout 10 "$coord" set-threshold 2 || fail "set-threshold over a squatted predictable name"
run_job squat-keyed
grep -q "belongs to uid 65534" "$dir/squat-keyed.err" && fail "a squatted predictable name costs a job with a secret: $(cat "$dir/squat-keyed.err")"
rc=0; timeout 10 "$coord" status >"$dir/st.out" 2>&1 || rc=$?
[ $rc -eq 0 ] && grep -q "^threshold  2" "$dir/st.out" && grep -q "^names      keyed with $HOME/.ppios/node-secret" "$dir/st.out" ||
  fail "status with a squatted predictable name: exit $rc: $(cat "$dir/st.out")"
timeout 10 "$coord" reset >"$dir/rs.out" 2>&1 || fail "reset with a squatted predictable name: $(cat "$dir/rs.out")"
[ "$(grep -c . "$dir/rs.out")" = 1 ] && grep -q "^kept $squatted (the predictable name.*belongs to uid 65534.*costs them nothing" "$dir/rs.out" ||
  fail "reset did not say what is at the predictable name in one line: $(cat "$dir/rs.out")"
[ "$(stat -c %s:%U "$squatted")" = 4096:nobody ] || fail "the victim changed the squatter's file"
# Without a secret ($HOME unset) the name is the predictable one: a warning that says why.
HOME= run_job squat
grep -q "belongs to uid 65534.*its name is predictable.*HOME is unset" "$dir/squat.err" ||
  fail "no warning about the squatted segment: $(cat "$dir/squat.err")"
rc=0; HOME= timeout 10 "$coord" status >"$dir/st.out" 2>&1 || rc=$?
[ $rc -eq 1 ] && grep -q "belongs to uid 65534" "$dir/st.out" || fail "status on a squatted name: exit $rc: $(cat "$dir/st.out")"
rm -f "$squatted"
export PPIOS_TARGET=$target-link
echo precious >"$dir/victim-file"
ln -s "$dir/victim-file" "/dev/shm/ppios-coord-v7.0.$PPIOS_TARGET"
HOME= run_job symlink
run_job symlink-keyed
[ "$(cat "$dir/victim-file")" = precious ] || fail "the victim's job wrote through a planted symlink"
rm -f "/dev/shm/ppios-coord-v7.0.$PPIOS_TARGET"
echo "squatting: costs nothing with a node secret; without one a file or a symlink costs a warning, no exit"

# 2b. The same from an unprivileged victim's side (nobody), with a file planted under its
# predictable name by another user (root here). With its own node secret the job, status,
# reset and gc are unaffected and say what is there without removing it.
export PPIOS_TARGET=$target-planted
planted=/dev/shm/ppios-coord-v7.$(id -u nobody).$PPIOS_TARGET
head -c 4096 /dev/zero >"$planted" && chmod 644 "$planted"
as_keyed_nobody() { as_nobody env HOME="$dir/nobody-home" "$@"; }
as_keyed_nobody timeout 30 "$dir/coord" bench --clients 2 --seconds 0.3 >"$dir/pk-job.out" 2>"$dir/pk-job.err" ||
  fail "planted, keyed: the victim's job failed: $(cat "$dir/pk-job.err")"
grep -q "belongs to uid 0" "$dir/pk-job.err" && fail "planted, keyed: the job was affected: $(cat "$dir/pk-job.err")"
as_keyed_nobody timeout 10 "$dir/coord" status >"$dir/pk-st.out" 2>&1 || fail "planted, keyed: status: $(cat "$dir/pk-st.out")"
as_keyed_nobody timeout 10 "$dir/coord" reset >"$dir/pk-rs.out" 2>&1 || fail "planted, keyed: reset: $(cat "$dir/pk-rs.out")"
grep -q "^kept $planted (the predictable name.*belongs to uid 0.*only its owner or root can remove it" "$dir/pk-rs.out" ||
  fail "planted, keyed: reset said nothing: $(cat "$dir/pk-rs.out")"
as_keyed_nobody timeout 10 "$dir/coord" gc >"$dir/pk-gc.out" 2>&1
grep -q "kept *$planted (planted: it belongs to uid 0, not to you; a predictable name your jobs no longer use" "$dir/pk-gc.out" ||
  fail "planted, keyed: gc said nothing: $(cat "$dir/pk-gc.out")"
[ -e "$planted" ] || fail "planted, keyed: the victim removed root's file"
# Without a secret (no $HOME): what is wrong and what to do is said by the job, status,
# reset (which cannot remove it) and gc (which keeps it, saying why); root's gc removes it
# and says it was planted.
as_nobody env -u HOME timeout 30 "$dir/coord" bench --clients 2 --seconds 0.3 >"$dir/pl-job.out" 2>"$dir/pl-job.err" ||
  fail "planted: the victim's job failed: $(cat "$dir/pl-job.err")"
grep -q "belongs to uid 0.*ppios-coord gc.*no node-local cap" "$dir/pl-job.err" ||
  fail "planted: the job did not say what is wrong and what to do: $(cat "$dir/pl-job.err")"
rc=0; as_nobody env -u HOME timeout 10 "$dir/coord" status >"$dir/pl-st.out" 2>&1 || rc=$?
[ $rc -eq 1 ] && grep -q "belongs to uid 0.*no node-local cap" "$dir/pl-st.out" || fail "planted: status exit $rc: $(cat "$dir/pl-st.out")"
rc=0; as_nobody env -u HOME timeout 10 "$dir/coord" reset >"$dir/pl-rs.out" 2>&1 || rc=$?
[ $rc -eq 1 ] && grep -q "belongs to uid 0.*ppios-coord gc" "$dir/pl-rs.out" || fail "planted: reset exit $rc: $(cat "$dir/pl-rs.out")"
as_nobody env -u HOME timeout 10 "$dir/coord" gc >"$dir/pl-gc.out" 2>&1
grep -q "kept *$planted (planted: it belongs to uid 0" "$dir/pl-gc.out" || fail "planted: gc said nothing: $(cat "$dir/pl-gc.out")"
[ -e "$planted" ] || fail "planted: the victim removed root's file"
timeout 10 "$coord" gc >"$dir/pl-gc-root.out" 2>&1
grep -q "removed $planted (planted: it belongs to uid 0, its name to uid $(id -u nobody)" "$dir/pl-gc-root.out" ||
  fail "planted: root's gc did not remove it or did not say why: $(cat "$dir/pl-gc-root.out")"
# A malformed segment of the victim's own: reset removes it and says what it was.
as_nobody sh -c "head -c 100 /dev/zero >'$planted'; chmod 600 '$planted'"
rc=0; as_nobody env -u HOME timeout 10 "$dir/coord" reset >"$dir/pl-rs2.out" 2>&1 || rc=$?
[ $rc -eq 0 ] && grep -q "removed a segment that could not be used.*unexpected size" "$dir/pl-rs2.out" ||
  fail "malformed: reset exit $rc: $(cat "$dir/pl-rs2.out")"
[ ! -e "$planted" ] || fail "malformed: reset left it"
echo "planted: job, status, reset and gc say what is wrong and what to do; root's gc removes it"

# 3. Shared with group 100, which the attacker is given: lock held, counters forged.
export PPIOS_TARGET=$target-group PPIOS_SHM_GROUP=100
timeout 10 "$coord" set-threshold 2 || fail "set-threshold (group)"
seg=/dev/shm/ppios-coord-v7.g100.$PPIOS_TARGET
[ "$(stat -c %a:%g "$seg")" = 660:100 ] || fail "group segment is $(stat -c %a:%g "$seg")"
as_nobody_in_group "$dir/attack" "$PPIOS_TARGET" 100 hold 60000 >"$dir/hold.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q holding "$dir/hold.out" && break; sleep 0.05; done
grep -q holding "$dir/hold.out" || fail "the attacker (in the group) could not take the lock: $(cat "$dir/hold.out")"
t0=$(date +%s%N)
run_job group-hold
took=$(( ($(date +%s%N) - t0) / 1000000 ))
grep -q "taken over" "$dir/group-hold.err" || fail "no takeover warning: $(cat "$dir/group-hold.err")"
echo "group: a lock held by the attacker cost a 1 s job $took ms (lease 500 ms)"
for kind in counters phantoms bounds holder-index threshold; do
  as_nobody_in_group "$dir/attack" "$PPIOS_TARGET" 100 forge "$kind" || fail "forge $kind as nobody"
  run_job "group-$kind"
  timeout 30 "$coord" status --json >/dev/null 2>"$dir/st.err" || fail "status after forge $kind: $(cat "$dir/st.err")"
done
echo "group: forged counters, phantom slots, bounds, holder index, cap 0: jobs and status survived"
echo PASS
