"""Cleanup that always happens: child process groups, FUSE mounts and the
redis-server are registered here as they are created and torn down in reverse
order on normal exit, errors, Ctrl-C, SIGTERM and SIGHUP.

Every child is started in a session of its own (start_new_session=True): a
Ctrl-C at the terminal then reaches only the harness, which stops the jobs
first and unmounts afterwards. If the terminal's SIGINT reached ppios-simfs
directly it could unmount under running jobs, and mpirun would print noise."""
import os
import signal
import subprocess
import sys


class Interrupted(BaseException):
    """SIGTERM or SIGHUP: unwinds like KeyboardInterrupt (not caught by
    `except Exception`), so every finally block runs."""


def _raise_interrupted(signum, _frame):
    raise Interrupted(signal.Signals(signum).name)


def install_signal_handlers():
    signal.signal(signal.SIGTERM, _raise_interrupted)
    signal.signal(signal.SIGHUP, _raise_interrupted)


def kill_group(proc, grace=5.0):
    """Stops a child started with start_new_session=True and everything it
    started (mpirun's ranks): SIGTERM to the group, then SIGKILL."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


class Resources:
    """A LIFO stack of cleanup callbacks. `add` returns a token; `release`
    runs one callback early (e.g. a job that finished); `close` runs the rest."""

    def __init__(self):
        self._stack = []

    def add(self, description, callback):
        token = object()
        self._stack.append((token, description, callback))
        return token

    def release(self, token):
        for i, (t, description, callback) in enumerate(self._stack):
            if t is token:
                del self._stack[i]
                self._run(description, callback)
                return

    def forget(self, token):
        self._stack = [entry for entry in self._stack if entry[0] is not token]

    def close(self):
        # A second Ctrl-C during cleanup must not leave a mount behind.
        old = {s: signal.signal(s, signal.SIG_IGN)
               for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        try:
            while self._stack:
                _token, description, callback = self._stack.pop()
                self._run(description, callback)
        finally:
            for s, handler in old.items():
                signal.signal(s, handler)

    @staticmethod
    def _run(description, callback):
        try:
            callback()
        except Exception as e:  # keep cleaning up the rest
            print(f"bench: cleanup of {description} failed: {e}", file=sys.stderr)
