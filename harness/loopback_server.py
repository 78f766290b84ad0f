"""A server program of the suite on a loopback port, as a child process: what :mod:`harness.gcs` (fake-gcs-server)
and :mod:`harness.azurite` (Azurite) are built on.

The program comes from a provider script of ``scripts/`` (built or installed once into the per-user cache, its path
printed): :func:`provide` runs it, and raises :class:`ServerUnavailable` with the script's own reason when it
cannot provide the program. Nothing here skips: a test whose server is missing fails, saying why.
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

from .bucket import free_port

ROOT = Path(__file__).resolve().parents[1]
STARTUP_TIMEOUT = 30.0
"""Seconds a server gets to answer its first request."""
PROVIDE_TIMEOUT = 1800
"""Seconds a provider script gets: a first build from empty Go caches takes minutes."""


class ServerUnavailable(RuntimeError):
    """A server program could not be provided or started; the message says why."""


def provide(script: str) -> str:
    """The path a provider script (``scripts/<script>``) prints last on stdout; its reason from stderr otherwise."""
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / script)],
        capture_output=True,
        text=True,
        timeout=PROVIDE_TIMEOUT,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    lines = result.stdout.strip().splitlines()
    if result.returncode == 0 and lines:
        return lines[-1]
    reason = " ".join(result.stderr.strip().splitlines()[-4:]) or f"exit status {result.returncode}"
    raise ServerUnavailable(f"scripts/{script} could not provide its server: {reason}")


class LoopbackServer:
    """One server process on a loopback port: :meth:`start` waits until :meth:`answers` says it does, and fails
    with the program's own output if it exits first; :meth:`stop` ends it. A subclass names the program
    (:attr:`name`), its command line (:meth:`command`) and how to tell that it answers."""

    name = "server"
    cwd: str | None = None
    """The folder the server runs in (None: the suite's)."""

    def __init__(self) -> None:
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()

    @property
    def endpoint(self) -> str:
        """``127.0.0.1:<port>``."""
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        """The command line that starts the server on :attr:`port`."""
        raise NotImplementedError

    def answers(self) -> bool:
        """True once the server answers a request (an HTTP error of the request is False)."""
        raise NotImplementedError

    def start(self, attempts: int = 3) -> LoopbackServer:
        """Start the server; a port taken between the choice and the bind is tried again with another."""
        for attempt in range(attempts):
            self.port = free_port()
            self._log.seek(0)
            self._log.truncate()
            self.process = subprocess.Popen(
                self.command(),
                stdout=self._log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.cwd,
                start_new_session=True,  # a Ctrl-C of the test run is the suite's to handle, not the server's
            )
            if self._wait_until_it_answers():
                return self
            output = self.output()
            self.stop()
            if "in use" not in output.lower() or attempt == attempts - 1:
                raise ServerUnavailable(f"{self.name} did not start on {self.endpoint}:\n{output}")
        raise AssertionError("unreachable")

    def _wait_until_it_answers(self) -> bool:
        """True once the server answers; False when it exited; a timeout fails with its output."""
        assert self.process is not None
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            with contextlib.suppress(httpx.HTTPError):
                if self.answers():
                    return True
            time.sleep(0.1)
        output = self.output()
        self.stop()
        raise ServerUnavailable(
            f"{self.name} did not answer on {self.endpoint} within {STARTUP_TIMEOUT:g} s:\n{output}"
        )

    def output(self) -> str:
        """What the server printed."""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def close(self) -> None:
        """Stop the server and drop its output."""
        self.stop()
        self._log.close()
