# report.nodebug: ppios-report names source lines of a program its user built without -g.
# SUM (examples/sum.c) is built by ppios-cc twice, with no -g (ppios-cc adds line tables,
# -g1) and with -g0 (no debug information at all), and run with 2 ranks on the emulated
# device (ppios-simfs) with PPIOS_TRACE and PPIOS_STATS. In both builds the report names
# the PT's prefetches by ppios-cc's call-site id (sum.c:LINE of the pread); the MT's reads
# are named too in the first build, and said to be unnamed in the -g0 one.
# usage: nodebug.sh SIMFS PPIOS_CC GEN_INPUT REPORT EXAMPLES_DIR MPIRUN [MPIRUN_FLAGS...]
SIMFS=$1 PPIOS_CC=$2 GEN=$3 REPORT=$4 EXAMPLES=$5 MPIRUN=$6
shift 6
# The simfs tests' helpers: a temporary directory, mount/unmount, skip without FUSE.
source "$(dirname "$0")/../../../bench/simfs/tests/lib.sh"
require_fuse
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
target="report-nodebug-$$"
export PPIOS_TARGET=$target PPIOS_THRESHOLD=2
EXTRA_CLEANUP='rm -f /dev/shm/*"$target"* 2>/dev/null'

line=$(grep -n 'pread(fd, buffer' "$EXAMPLES/sum.c" | cut -d: -f1)
[[ -n $line ]] || fail "no pread line in $EXAMPLES/sum.c"
cd "$TEST_DIR"
cp "$EXAMPLES/sum.c" "$EXAMPLES/kernel_common.c" "$EXAMPLES/kernel_common.h" .
"$PPIOS_CC" -O2 -o sum_ppios sum.c kernel_common.c || fail "ppios-cc (no -g) failed"
mkdir g0 && "$PPIOS_CC" -O2 -g0 -o g0/sum_ppios sum.c kernel_common.c || fail "ppios-cc -g0 failed"
readelf -S g0/sum_ppios | grep -q debug_line && fail "the -g0 build has a line table"
readelf -S sum_ppios | grep -q debug_line || fail "ppios-cc added no line table to a build without -g"

"$GEN" --mib 16 --seed 7 -o "$BACKING/a.txt" >/dev/null || fail "gen-input failed"
mount_simfs --peak-mibps 200 --optimal-streams 2
for build in plain g0; do
    exe=$TEST_DIR/sum_ppios
    [[ $build == g0 ]] && exe=$TEST_DIR/g0/sum_ppios
    mkdir "$build.out"
    PPIOS_STATS=$TEST_DIR/$build.out/stats.jsonl PPIOS_TRACE=$TEST_DIR/$build.out/trace \
        timeout 120 "$MPIRUN" "$@" -np 2 "$exe" --chunk 512K --compute-factor 8 "$MNT/a.txt" \
        >"$build.txt" 2>&1 || fail "$build: sum_ppios failed: $(cat "$build.txt")"
    python3 "$REPORT" "$build.out" >"$build.report" || fail "$build: ppios-report failed"
    python3 "$REPORT" "$build.out/stats.jsonl" >"$build.stats-report" || fail "$build: ppios-report (stats) failed"
    cat "$build.report"
done
unmount_simfs

python3 - "$line" <<'PY' || fail "the report does not name the lines (see above)"
import re, sys
line = sys.argv[1]
bad = []
for build in ("plain", "g0"):
    for kind in ("report", "stats-report"):
        text = open(f"{build}.{kind}").read()
        # The PT's prefetches are named by ppios-cc's call-site id in every build.
        m = re.search(rf"read at sum_ppios sum\.c:{line}: (.*)", text)
        if not m or not re.search(r"[1-9]\d* prefetched \(\d+ late\), \d+\.\d MiB read by the PT", m.group(1)):
            bad.append(f"{build} {kind}: no PT prefetches named at sum.c:{line}: {m and m.group(0)}")
            continue
        mt_named = "calls," in m.group(1) and "from the cache" in m.group(1)
        if build == "plain" and not mt_named:
            bad.append(f"{build} {kind}: the MT's reads are not named with ppios-cc's line tables: {m.group(0)}")
        if build == "g0" and ("the MT's calls not named" not in m.group(1)):
            bad.append(f"{build} {kind}: -g0 build, yet the MT's reads seem named: {m.group(0)}")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
pass "PT prefetches named by call-site id without -g; MT reads through ppios-cc's -g1"
