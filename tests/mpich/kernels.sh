# mpich.kernels: the paper's kernels (examples/) built with MPICH: plain with MPICH's
# mpicc.mpich, prefetching with ppios-cc driving it (PPIOS_CC), both run under MPICH's
# mpiexec on the emulated device (ppios-simfs). Each prefetching build must link the
# MPICH runtime and not Open MPI, print what the plain build prints (DSCAL: write the
# same file), and be served from its prefetch cache.
# usage: kernels.sh SIMFS PPIOS_CC GEN_INPUT EXAMPLES_DIR MPICH_CC MPICH_EXEC
SIMFS=$1 PPIOS_CC_EXE=$2 GEN=$3 EXAMPLES=$4 MPICH_CC=$5 MPICH_EXEC=$6
# The simfs tests' helpers: a temporary directory, mount/unmount, skip without FUSE.
source "$(dirname "$0")/../../bench/simfs/tests/lib.sh"
require_fuse
target="mpich-kernels-$$"
export PPIOS_TARGET=$target PPIOS_THRESHOLD=2
EXTRA_CLEANUP='rm -f /dev/shm/*"$target"* 2>/dev/null'

cd "$TEST_DIR"
cp "$EXAMPLES"/{sum,avg,dscal,grep,kernel_common}.c "$EXAMPLES/kernel_common.h" .
for k in sum avg dscal grep; do
    "$MPICH_CC" -O2 -o "${k}_plain" "$k.c" kernel_common.c || fail "$MPICH_CC $k.c failed"
    PPIOS_CC=$MPICH_CC "$PPIOS_CC_EXE" -O2 -o "${k}_ppios" "$k.c" kernel_common.c 2>"$k.cc.log" \
        || fail "ppios-cc with PPIOS_CC=$MPICH_CC failed on $k.c: $(cat "$k.cc.log")"
    needed=$(readelf -d "${k}_ppios")
    grep -q 'NEEDED.*libmpich' <<<"$needed" || fail "${k}_ppios does not link MPICH: $needed"
    grep -q 'NEEDED.*libmpi\.so' <<<"$needed" && fail "${k}_ppios links Open MPI's libmpi"
    grep -q 'RUNPATH.*ppios-mpich' <<<"$needed" || fail "${k}_ppios is not linked with the MPICH runtime: $needed"
done

"$GEN" --mib 12 --seed 3 -o "$BACKING/in.txt" >/dev/null || fail "gen-input failed"
mount_simfs --peak-mibps 200 --optimal-streams 2
for k in sum avg grep dscal; do
    for build in plain ppios; do
        args=(--chunk 256K --compute-factor 4)
        [[ $k == dscal ]] && args+=(-o "$TEST_DIR/$k.$build.out")
        PPIOS_STATS=$TEST_DIR/$k.$build.jsonl timeout 120 "$MPICH_EXEC" -n 2 "./${k}_$build" \
            "${args[@]}" "$MNT/in.txt" >"$k.$build.txt" 2>"$k.$build.err" \
            || fail "$k $build under $MPICH_EXEC failed: $(cat "$k.$build.err")"
    done
    # Timings (the TIME line) differ; the results must not.
    grep -v '^TIME ' "$k.plain.txt" >"$k.plain.cmp" || true
    grep -v '^TIME ' "$k.ppios.txt" >"$k.ppios.cmp" || true
    cmp -s "$k.plain.cmp" "$k.ppios.cmp" || fail "$k: the prefetching build printed
$(cat "$k.ppios.txt")
the plain one
$(cat "$k.plain.txt")"
    [[ -s $k.plain.cmp ]] || fail "$k printed nothing to compare"
    if [[ $k == dscal ]]; then
        cmp -s "$k.plain.out" "$k.ppios.out" || fail "dscal: the output files differ"
    fi
    [[ ! -e $k.plain.jsonl ]] || fail "$k: the plain MPICH build wrote ppios statistics"
    hits=$(python3 -c 'import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert len(lines) == 2, f"{len(lines)} statistics lines, expected 2"
print(sum(l["hit_bytes"] for l in lines))' "$k.ppios.jsonl") || fail "$k: bad statistics"
    [[ $hits -gt 0 ]] || fail "$k: the prefetching build got no cache hits"
    pass "$k under MPICH: same result as plain, $hits bytes from the prefetch cache"
done
unmount_simfs
