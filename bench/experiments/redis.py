"""A private redis-server for E2: the four jobs of a point share one PPIOS cap
through it (PPIOS_COORDINATOR=unix://...). Unix socket, no TCP port, no
persistence; started once per harness run and always stopped."""
import os
import shutil
import socket
import subprocess
import time

from . import resources as res


class RedisServer:
    def __init__(self, workdir, resources):
        self.workdir, self.resources = workdir, resources
        self.socket = os.path.join(workdir, "redis.sock")
        self.proc = None

    @property
    def url(self):
        return f"unix://{self.socket}"

    def start(self, timeout=10.0):
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (Debian package redis-server); "
                               "E2 needs it for the shared coordinator")
        os.makedirs(self.workdir, exist_ok=True)
        log = open(os.path.join(self.workdir, "redis.log"), "ab")
        try:
            self.proc = subprocess.Popen(
                [binary, "--port", "0", "--unixsocket", self.socket, "--unixsocketperm", "700",
                 "--save", "", "--appendonly", "no", "--dir", self.workdir,
                 "--daemonize", "no"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
        finally:
            log.close()
        self.resources.add("redis-server", self.stop)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}; "
                                   f"see {self.workdir}/redis.log")
            if self._ping():
                return self
            time.sleep(0.05)
        raise RuntimeError("redis-server did not answer within %g s" % timeout)

    def _ping(self):
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(1)
                s.connect(self.socket)
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self):
        if self.proc is not None:
            res.kill_group(self.proc, grace=5)
            self.proc = None
        try:
            os.unlink(self.socket)
        except OSError:
            pass
