# mpich.wrapper: ppios-cc tells the MPI wrapper it drives from its answers, and stops
# (exit non-zero, no output file, a message saying why) when the compiler it is given
# is no MPI wrapper it knows, rather than build a program that never prefetches.
# usage: wrapper.sh PPIOS_CC MPICH_CC
set -euo pipefail
PPIOS_CC_EXE=$1 MPICH_CC=$2
dir=$(mktemp -d /tmp/ppios-mpich-wrapper.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$dir"
printf '#include <mpi.h>\n#include <stdio.h>\nint main(int c, char **v) { MPI_Init(&c, &v); puts("hi"); MPI_Finalize(); return 0; }\n' >hi.c

# A plain C compiler, and a command that is no compiler at all.
for cc in gcc true; do
    rc=0
    PPIOS_CC=$cc "$PPIOS_CC_EXE" -o hi_$cc hi.c 2>err.txt || rc=$?
    [[ $rc -ne 0 ]] || fail "ppios-cc with PPIOS_CC=$cc exited 0"
    [[ ! -e hi_$cc ]] || fail "ppios-cc with PPIOS_CC=$cc wrote an executable"
    grep -q "cannot tell which MPI '$cc'" err.txt || fail "PPIOS_CC=$cc: no clear message: $(cat err.txt)"
    grep -q -- "-compile_info" err.txt || fail "PPIOS_CC=$cc: the message does not say what was asked"
    echo "ok: PPIOS_CC=$cc refused: $(head -c 120 err.txt)..."
done

# Each real wrapper links its own MPI's runtime.
PPIOS_CC=$MPICH_CC "$PPIOS_CC_EXE" -o hi_mpich hi.c || fail "MPICH build failed"
readelf -d hi_mpich | grep -q 'RUNPATH.*ppios-mpich' || fail "MPICH build without the MPICH runtime"
"$PPIOS_CC_EXE" -o hi_default hi.c || fail "default build failed"
readelf -d hi_default | grep 'RUNPATH' | grep -q 'ppios-mpich' && fail "Open MPI build linked the MPICH runtime"
echo "ok: mpicc and $MPICH_CC each link their own runtime"
