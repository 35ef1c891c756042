"""Kernel inputs from examples' gen-input, cached across runs: generating
hundreds of MiB of text takes seconds, and the same (size, seed) always gives
the same bytes, so a file of the right size is reused as is."""
import os
import subprocess


def ensure(gen_input, cache_dir, mib, seed):
    """Returns the file name (relative to cache_dir) of a MIB-sized input."""
    name = f"input-{mib}MiB-seed{seed}.txt"
    path = os.path.join(cache_dir, name)
    if os.path.exists(path) and os.path.getsize(path) == mib << 20:
        return name, False
    os.makedirs(cache_dir, exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        r = subprocess.run([gen_input, "--mib", str(mib), "--seed", str(seed), "-o", tmp],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"gen-input failed: {r.stderr.decode(errors='replace')}")
        os.replace(tmp, path)  # atomic: a half-written file is never taken for a cached one
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return name, True
