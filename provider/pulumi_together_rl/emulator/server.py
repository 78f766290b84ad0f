"""Serve the emulator over real loopback HTTP from a daemon thread (tests, notebooks, users' CI)."""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import sys
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


def warn_if_exposed(sock: socket.socket) -> None:
    """One line on stderr when ``sock`` listens on more than loopback: the control API has no authentication, so
    whoever reaches the port reads the state and the request log, changes the settings and adds API keys."""
    host, port = sock.getsockname()[:2]
    if ipaddress.ip_address(host).is_loopback:
        return
    print(
        f"warning: the emulator listens on {host} port {port}, not only on loopback: its control API "
        "(/_emulator) has no authentication, and anyone who can reach it can read the state and the request log, "
        "change the settings and add API keys. Listen on 127.0.0.1 unless others must reach it.",
        file=sys.stderr,
        flush=True,
    )


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
        date_header=False,  # the app sends its own, on the emulator's clock (EmulatorApp)
        timeout_graceful_shutdown=2,
    )


class EmulatorServer:
    """The emulator on ``http://host:port`` in a daemon thread; a context manager.

    ``settings`` are the start settings (keys of ``/_emulator/settings``) that ``reset`` restores.
    ``base_url`` and ``port`` raise :class:`RuntimeError` before the first :meth:`start`; after :meth:`stop`
    they keep answering the address the server had (a test may still want to name it, e.g. to check that
    nothing listens there any more). A new :meth:`start` binds again (a fresh ephemeral port for port 0).
    """

    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, *, log_level: str = "warning", **settings: Any
    ):
        self.host = host
        self.app = EmulatorApp(**settings)
        self._requested_port = port
        self._log_level = log_level
        self._sock: socket.socket | None = None
        self._address: tuple[str, int] | None = None  # (base URL, port) of the last start; kept after stop
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._address is None:
            raise RuntimeError("the emulator server was never started")
        return self._address[1]

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``: no trailing slash, no ``/v1``."""
        if self._address is None:
            raise RuntimeError("the emulator server was never started")
        return self._address[0]

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
        warn_if_exposed(self._sock)
        self._address = (base_url_of(self._sock), int(self._sock.getsockname()[1]))
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
        self._sock = None
        self._thread = None
        self._server = None

    def __enter__(self) -> EmulatorServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.base_url if self._thread is not None else "stopped"
        return f"EmulatorServer({where})"
