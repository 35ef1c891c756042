#!/usr/bin/env bash
# bench.overhead: ppios-overhead runs every case it offers on a small file, prints one
# well-formed line each, and in the served case the MT really gets its bytes from the
# cache (PPIOS_STATS hit_bytes, nearly all the bytes read through the wrapper). No timing.
# usage: smoke_test.sh BUILD_DIR
set -euo pipefail
build=$1
bin="$build/bench/ppios-overhead"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
head -c $((4 << 20)) /dev/urandom > "$dir/data.bin"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PPIOS_TARGET="overhead-smoke-$$" HOME="$dir"
pattern='^api=[a-z]+ bytes=[0-9]+ mode=[a-z]+ pt=(none|idle|served) calls=[0-9]+ reps=[0-9]+ plain_ns=[0-9]+ ppios_ns=[0-9]+ ratio=[0-9.]+ '
for api in read pread fread; do
  for mode in off ppios; do
    line=$(PPIOS_MODE=$mode mpirun -np 1 "$bin" "$dir/data.bin" "$api" 10 1000 1)
    grep -Eq "$pattern" <<<"$line" || { echo "bad line: $line" >&2; exit 1; }
  done
done
for api in read pread; do
  rm -f "$dir/stats.json"
  line=$(PPIOS_MODE=ppios PPIOS_STATS="$dir/stats.json" mpirun -np 1 "$bin" --served "$dir/data.bin" "$api" 10 2000 2)
  grep -Eq "$pattern" <<<"$line" || { echo "bad line: $line" >&2; exit 1; }
  python3 - "$dir/stats.json" <<'PY'
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if l.strip()][0]
# Two wrapped passes of 2000 10-byte reads; the warm-up and plain passes bypass the wrapper.
assert s["mt_read_bytes"] == 2 * 2000 * 10, s["mt_read_bytes"]
# The thread fetches ahead during a 2 s head start: on a loaded machine the last few
# reads may still catch it in flight.
assert s["hit_bytes"] >= 0.9 * s["mt_read_bytes"], (s["hit_bytes"], s["mt_read_bytes"])
PY
done
# A bad request is refused with the usage line and exit 2.
if mpirun -np 1 "$bin" --served "$dir/data.bin" fread 10 10 1 > "$dir/bad.out" 2>&1; then
  echo "fread --served was accepted" >&2
  exit 1
fi
grep -q 'served is for read and pread' "$dir/bad.out"
echo "bench.overhead: ok"
