"""``nnrt serve`` in a child process, for tests, benchmarks and scripts (this
module imports no server code: a client process may hold its own protobuf
stubs of the protocol, e.g. tritonclient.grpc's, which define the same
names as ours).  It
starts bounded (``--exit-after``), waits until the server listens and its
models are ready, and stops by signal, then kill, each with a timeout."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Sequence

from nnrt_core.errors import ExecutionError

__all__ = ["ServerProcess", "LISTENING"]

#: the first line ``nnrt serve`` prints on stdout, then a JSON object of its addresses
LISTENING = "nnrt serve: listening "


class ServerProcess:
    """``with ServerProcess(repo, exit_after=120) as s: s.http_url, s.grpc_address``."""

    def __init__(self, repository: str | os.PathLike, *, extra_args: Sequence[str] = (), exit_after: float = 300,
                 start_timeout: float = 180, env: dict[str, str] | None = None) -> None:
        self.args = [sys.executable, "-m", "nnrt_serve", "--model-repository", str(repository), "--http-port", "0",
                     "--grpc-port", "0", "--exit-after", str(exit_after), *extra_args]
        self.start_timeout = start_timeout
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen | None = None
        self.addresses: dict[str, Any] = {}
        self.stderr_lines: list[str] = []

    @property
    def http_url(self) -> str:
        return self.addresses["http"]

    @property
    def http_address(self) -> str:
        return self.http_url.split("://", 1)[1]

    @property
    def grpc_address(self) -> str:
        return self.addresses["grpc"]

    @property
    def pid(self) -> int:
        return self.proc.pid

    def start(self, wait_ready: bool = True) -> "ServerProcess":
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=self.env)
        threading.Thread(target=self._drain, daemon=True).start()
        deadline = time.monotonic() + self.start_timeout
        line = self._read_listening(deadline)
        self.addresses = json.loads(line[len(LISTENING):])
        if wait_ready:
            self.wait_ready(deadline)
        return self

    def _drain(self) -> None:
        for line in self.proc.stderr:
            self.stderr_lines.append(line.rstrip())

    def _read_listening(self, deadline: float) -> str:
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(max(deadline - time.monotonic(), 0))
        if not box or not box[0].startswith(LISTENING):
            self.stop()
            raise ExecutionError(f"nnrt serve did not start: {box[:1]} {self.stderr_lines[-20:]}")
        return box[0]

    def wait_ready(self, deadline: float) -> None:
        url = self.http_url + "/v2/health/ready"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        err = f"nnrt serve not ready in {self.start_timeout} s: {self.stderr_lines[-20:]}"
        self.stop()
        raise ExecutionError(err)

    def stop(self, timeout: float = 10) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.terminate()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(timeout)

    def descendants(self) -> list[tuple[int, str]]:
        """(pid, command line) of every process below the server (Linux /proc): e.g. the Ray Serve
        replicas of ``--ray``, whose command lines hold ``ServeReplica:nnrt``."""
        parents: dict[int, int] = {}
        cmd: dict[int, str] = {}
        for p in Path("/proc").iterdir():
            if not p.name.isdigit():
                continue
            try:
                parents[int(p.name)] = int((p / "stat").read_text().rsplit(")", 1)[1].split()[1])
                cmd[int(p.name)] = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except (OSError, ValueError, IndexError):  # gone meanwhile
                continue
        out, todo = [], [self.proc.pid]
        while todo:
            parent = todo.pop()
            for child, pp in parents.items():
                if pp == parent and child in cmd:
                    out.append((child, cmd[child]))
                    todo.append(child)
        return out

    def rss_bytes(self) -> int:
        """The server's resident memory (Linux)."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def __enter__(self) -> "ServerProcess":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
