"""``python -m pulumi_together_rl.emulator``: serve the Together RL API emulator over HTTP.

The first line on stdout is the base URL (e.g. ``http://127.0.0.1:43117``); point ``TOGETHER_BASE_URL`` at it.
Logs go to stderr. SIGINT / SIGTERM shut the server down cleanly (exit status 0), including one sent the moment
the first line is read: the handlers are installed before the URL is printed. Out-of-range options are usage
errors (exit status 2), a port that cannot be bound exits 1.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import signal
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from .errors import InvalidRequest
from .settings import DEFAULT_SETTINGS, TIMING_KEYS

_TIMINGS_HELP = (
    "seconds each state lasts, as KEY=SECONDS pairs joined by commas; keys: "
    + ", ".join(TIMING_KEYS)
    + " (or 'all' for every key); 0 = the next request sees the next state. Defaults: "
    + ", ".join(f"{k}={v:g}" for k, v in DEFAULT_SETTINGS["timings"].items())
)


def _int_in(low: int, high: int | None = None) -> Any:
    """An argparse ``type``: an integer in ``[low, high]`` (no upper bound when ``high`` is None)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low or (high is not None and value > high):
            wanted = f"between {low} and {high}" if high is not None else f">= {low}"
            raise argparse.ArgumentTypeError(f"{value} is out of range (must be {wanted})")
        return value

    parse.__name__ = "integer"  # argparse names the type in its "invalid <type> value" fallback message
    return parse


def _parse_timings(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep:
            raise argparse.ArgumentTypeError(f"expected KEY=SECONDS, got {part!r}")
        try:
            seconds = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{key}: {value!r} is not a number of seconds") from None
        if not math.isfinite(seconds) or seconds < 0:
            raise argparse.ArgumentTypeError(
                f"{key}: {value.strip()!r} must be a finite number of seconds >= 0"
            )
        if key == "all":
            out.update(dict.fromkeys(TIMING_KEYS, seconds))
        elif key in TIMING_KEYS:
            out[key] = seconds
        else:
            raise argparse.ArgumentTypeError(f"unknown timing {key!r} (known: {', '.join(TIMING_KEYS)}, all)")
    return out


def _load_models(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError) as exc:
        raise argparse.ArgumentTypeError(f"cannot read supported models from {path}: {exc}") from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m pulumi_together_rl.emulator",
        description=(
            "Serve an offline emulator of the Together AI RL API (model resources, training sessions, "
            "supported models) under /v1, with a control API under /_emulator. Prints the base URL as the "
            "first line on stdout, then serves until SIGINT or SIGTERM."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="interface to listen on; beyond loopback, anyone who reaches it can use the control API (no "
        "authentication: read the state, add API keys)",
    )
    p.add_argument(
        "--port",
        type=_int_in(0, 65535),
        default=0,
        help="TCP port (0-65535); 0 picks a free one (printed on stdout)",
    )
    p.add_argument(
        "--api-key",
        default=None,
        help="the only bearer key accepted; when unset, any non-empty key is accepted (no key: 401)",
    )
    p.add_argument("--user-id", default=DEFAULT_SETTINGS["user_id"], help="created_by of new objects ('me')")
    p.add_argument(
        "--timings", type=_parse_timings, default=None, metavar="KEY=SECONDS,...", help=_TIMINGS_HELP
    )
    p.add_argument(
        "--conflict-status",
        type=_int_in(400, 599),
        default=DEFAULT_SETTINGS["conflict_status"],
        help="HTTP status (400-599) of state conflicts (stop with attached sessions, extend-expiry or session "
        "create on a resource that is not READY)",
    )
    p.add_argument(
        "--session-cap-lora",
        type=_int_in(0),
        default=DEFAULT_SETTINGS["session_cap_lora"],
        help="concurrent sessions per LoRA resource (>= 0); one more answers 429 with Retry-After",
    )
    p.add_argument(
        "--session-cap-full",
        type=_int_in(0),
        default=DEFAULT_SETTINGS["session_cap_full"],
        help="concurrent sessions per full-weight resource (>= 0)",
    )
    p.add_argument(
        "--queue-position",
        type=_int_in(1),
        default=None,
        help="status_details.queue_position (>= 1) reported while PENDING (default: computed from the queue)",
    )
    p.add_argument(
        "--supported-models",
        type=_load_models,
        default=None,
        metavar="FILE",
        help="JSON file replacing the built-in supported-models table (a list, or {'data': [...]})",
    )
    p.add_argument(
        "--log-level",
        default="warning",
        choices=("critical", "error", "warning", "info", "debug", "trace"),
        help="server log level (logs go to stderr; 'info' and below include an access log)",
    )
    return p


def settings_from_args(args: argparse.Namespace) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "api_key": args.api_key,
        "user_id": args.user_id,
        "conflict_status": args.conflict_status,
        "session_cap_lora": args.session_cap_lora,
        "session_cap_full": args.session_cap_full,
        "queue_position": args.queue_position,
        "supported_models": args.supported_models,
    }
    if args.timings:
        settings["timings"] = args.timings
    return settings


def _log_config() -> dict[str, Any]:
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    for handler in config["handlers"].values():
        handler["stream"] = "ext://sys.stderr"  # stdout carries only the base URL
    return config


@contextlib.contextmanager
def _stop_on_signals(server: Any) -> Iterator[None]:
    """SIGINT/SIGTERM ask the server to exit (a second one forces it); previous handlers are restored."""

    def handle(signum: int, frame: Any) -> None:
        if server.should_exit:
            server.force_exit = True
        server.should_exit = True

    wanted = [signal.SIGINT, signal.SIGTERM]
    previous = {sig: signal.signal(sig, handle) for sig in wanted}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


EXTRA_MODULES = ("fastapi", "uvicorn", "starlette", "anyio", "h11")
"""What the ``[emulator]`` extra brings (a missing one gets the install hint, not a traceback)."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)

    try:
        import uvicorn

        from .app import EmulatorApp
        from .server import base_url_of, bind_socket, uvicorn_config, warn_if_exposed
    except ModuleNotFoundError as exc:
        if exc.name not in EXTRA_MODULES:
            raise
        print(
            f"starting the emulator: its extra is not installed (no module named {exc.name!r}). Install it with "
            "`pip install 'pulumi-together-rl[emulator]'` (or `uv sync` in a clone of the repository).",
            file=sys.stderr,
        )
        return 2

    try:
        app = EmulatorApp(**settings_from_args(args))
    except InvalidRequest as exc:
        parser.error(exc.message)
    try:
        sock = bind_socket(args.host, args.port)
    except OSError as exc:
        print(f"emulator: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    warn_if_exposed(sock)

    class _Server(uvicorn.Server):
        # We install our own handlers: uvicorn's would re-raise the signal after shutdown (exit status -15).
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

        def install_signal_handlers(self) -> None:  # the hook's name in older uvicorn releases
            return None

    server = _Server(uvicorn_config(app, log_level=args.log_level, log_config=_log_config()))
    # The handlers go in *before* the URL is printed: a supervisor may read the first line and send SIGTERM at
    # once. Such an early signal only sets should_exit, which uvicorn checks right after startup: clean exit 0.
    try:
        with _stop_on_signals(server):
            print(base_url_of(sock), flush=True)
            server.run(sockets=[sock])
    finally:
        sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
