"""Serve the emulator over real loopback HTTP from a daemon thread (tests, notebooks, users' CI)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import Any

import uvicorn

from .app import EmulatorApp


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0 = ephemeral). Connections queue until served."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP matters: asyncio only sets TCP_NODELAY on accepted sockets whose proto says TCP, and
    # without it every response pays the ~40 ms Nagle / delayed-ACK stall.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def base_url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def uvicorn_config(app: EmulatorApp, *, log_level: str = "warning", log_config: Any = None) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        http="h11",
        lifespan="off",
        log_level=log_level,
        log_config=log_config,
        access_log=log_level in ("info", "debug", "trace"),
        timeout_graceful_shutdown=2,
    )


class EmulatorServer:
    """The emulator on ``http://host:port`` in a daemon thread; a context manager.

    ``settings`` are the start settings (keys of ``/_emulator/settings``) that ``reset`` restores.
    """

    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, *, log_level: str = "warning", **settings: Any
    ):
        self.host = host
        self.app = EmulatorApp(**settings)
        self._requested_port = port
        self._log_level = log_level
        self._sock: socket.socket | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._sock is None:
            raise RuntimeError("the emulator server is not started")
        return int(self._sock.getsockname()[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``: no trailing slash, no ``/v1``."""
        if self._sock is None:
            raise RuntimeError("the emulator server is not started")
        return base_url_of(self._sock)

    @property
    def state(self) -> Any:
        return self.app.state

    def control(self) -> Any:
        from .control import EmulatorControl

        return EmulatorControl(self.base_url)

    def start(self, timeout: float = 10.0) -> EmulatorServer:
        """Bind, serve in a daemon thread, and return once the server accepts connections."""
        if self._thread is not None:
            return self
        self._sock = bind_socket(self.host, self._requested_port)
        self._server = uvicorn.Server(uvicorn_config(self.app, log_level=self._log_level))
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._sock]},
            name=f"together-rl-emulator:{self.port}",
            daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the emulator server did not start")
            time.sleep(0.005)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Shut the server down (in-flight requests get a moment to finish) and wait for the thread."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive() and self._server is not None:
                self._server.force_exit = True
                self._thread.join(timeout)
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
        self._thread = None
        self._server = None

    def __enter__(self) -> EmulatorServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.base_url if self._sock is not None and self._thread is not None else "stopped"
        return f"EmulatorServer({where})"
