"""What the user reads: the one sentence of a failure, the one locked line on stderr, and what each failure
means and what to do about it.

* :class:`UserError` is every error a user sees, in the project's one grammar:
  ``<doing what> <kind> (<id>): <cause>. <what to do>``. The provider (every face) and the orphan finder raise
  it; anything else that reaches the user is a bug and keeps its traceback (:func:`is_bug`).
* :func:`explain` turns an exception of the client, a wait or the journal into that cause and "what to do",
  for an :class:`Audience`: a stack's (:data:`STACK`: stack config, ``pulumi`` commands) or an operator's
  running a command (:func:`operator`: flags and environment variables). The causes are the same for both.
* :func:`progress_line` (alias :func:`log`) writes one whole line on stderr under the one lock every writer of
  that stream shares, made harmless first (:func:`printable`); a face that can say which resource a line is
  about routes the lines of one operation elsewhere with :func:`lines_to` (the plugin: the engine's log, under
  the resource's URN).
* :class:`WaitFailed` / :class:`WaitTimeout` are how a wait ends without its target; :func:`format_elapsed` and
  :func:`until` are how durations and deadlines read.

Nothing here calls the API or imports the client's HTTP side.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
import re
import sys
import threading
import traceback
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta, timezone
from typing import IO, Any
from urllib.parse import urlsplit

from . import config
from .client import errors


class UserError(Exception):
    """An error shown to the user as one sentence: ``<doing> <kind> (<ident>): <cause>. <todo>``.

    ``kind`` may be empty (``connecting to the Together API: ...``). ``ident`` can come from the user (an id
    given to ``.get()`` or ``pulumi import``): the sentence shows it :func:`printable`."""

    def __init__(self, doing: str, kind: str, ident: str | None, cause: str, todo: str = "") -> None:
        # Secret inputs never reach the sentence (see :func:`hiding`), whichever part names them.
        ident = hide(ident) if ident else ident
        cause, todo = (hide(part) if part else part for part in (cause, todo))
        self.doing, self.kind, self.ident, self.cause, self.todo = doing, kind, ident, cause, todo
        where = f" ({printable(ident, LOG_LINE_LIMIT)})" if ident else ""
        subject = f"{doing} {kind}".strip()
        tail = f" {todo.rstrip('.')}." if todo else ""
        super().__init__(f"{subject}{where}: {cause.rstrip('.')}.{tail}")


@dataclasses.dataclass(frozen=True)
class Audience:
    """Who reads a sentence, and so what its "what to do" says. The cause is the same for every audience."""

    key: Callable[[bool], str]
    """A rejected key; the argument: whether the operation may run on a copy of the config recorded earlier."""
    base_url: Callable[[bool, bool], str]
    """A base URL that cannot be used: ``(unreachable, recorded)`` (not unreachable: malformed)."""
    configuration: Callable[[BaseException], tuple[str, str]]
    """A client that cannot be built: (cause, what to do)."""
    host: Callable[[], str | None]
    """The API's host (and port) as this reader knows it, for "could not be reached"; None: not named."""
    forbidden: str
    throttled: str
    rejected: str
    conflict: str
    later: str
    rerun: str
    unexpected: str


RERUN = "Run the command again"
UNEXPECTED_TODO = (
    "Run the command again; if it fails the same way, report it as a bug of pulumi-together-rl, "
    "with this message"
)


def _stack_configuration(exc: BaseException) -> tuple[str, str]:
    return _configuration_cause(exc), (
        "Check together:apiKey / TOGETHER_API_KEY and together:baseUrl / TOGETHER_BASE_URL, then run the "
        "command again"
    )


STACK = Audience(
    key=lambda recorded: api_key_todo(config.current().api_key_from, recorded=recorded),
    base_url=lambda unreachable, recorded: base_url_todo(
        config.current().base_url_from, unreachable=unreachable, recorded=recorded
    ),
    configuration=_stack_configuration,
    host=lambda: _api_host(),
    forbidden="Use a key of the project that owns it",
    throttled="Wait and run `pulumi up` again; if a session cap is reached, stop a session on that model resource",
    rejected="Fix that input and run `pulumi up` again",
    conflict="Check the object's status, then run the command again",
    later="Run the command again in a few minutes",
    rerun=RERUN,
    unexpected=UNEXPECTED_TODO,
)
"""A stack's reader: the settings are stack config (or the environment), the commands are ``pulumi``'s."""


def operator(key_from: str | None = None) -> Audience:
    """An operator running one of this package's commands (the orphan finder): the settings are flags and
    environment variables; ``key_from`` names where the key came from (``stack dev's together:apiKey``)."""

    def configuration(exc: BaseException) -> tuple[str, str]:
        message = str(exc).removeprefix("creating the Together RL client: ").split(". ", 1)[0]
        message = message.replace("the base_url argument (Pulumi config together:baseUrl)", "--base-url")
        return message, "Check TOGETHER_API_KEY / --api-key and TOGETHER_BASE_URL / --base-url"

    return Audience(
        key=lambda recorded: f"Check {key_from}" if key_from else "Check TOGETHER_API_KEY / --api-key",
        base_url=lambda unreachable, recorded: (
            "Check TOGETHER_BASE_URL / --base-url and the network, then run again"
        ),
        configuration=configuration,
        host=lambda: None,
        forbidden="Use a key that may list and stop the project's model resources and training sessions",
        throttled="Wait a minute and run again",
        rejected="Check its status, then run again",
        conflict="Check its status, then run again",
        later="Run again in a few minutes",
        rerun="Run again",
        unexpected="Run again; if it fails the same way, report it as a bug of pulumi-together-rl",
    )


# Refresh and destroy configure the provider from the stack config recorded at the last deployment, not from
# the stack config of now (config.py's docstring): after a key rotation or a new base URL they fail until
# RECORD_CONFIG records it, and `pulumi config set` alone, the obvious advice, changes nothing for them.
_RECORDED = (
    "Refresh and destroy (and the refresh that `refresh: always` runs first) use the {what} recorded with the "
    "stack's provider at its last deployment, not the current stack config"
)


def base_url_todo(source: str | None, *, unreachable: bool = False, recorded: bool = False) -> str:
    """What to do about the base URL, naming the setting it really came from.

    ``unreachable``: no answer came from it (else: it is malformed). ``recorded``: the operation may have been
    configured from the stack config recorded at the last deployment (see :data:`_RECORDED`), so a
    ``together:baseUrl`` changed or set since then is not the one used.
    """
    if not unreachable:
        if source == "TOGETHER_BASE_URL":
            return (
                "The URL comes from the environment variable TOGETHER_BASE_URL (together:baseUrl is not set): set "
                "it to an http(s) URL, or unset it for the default"
            )
        return (
            "The URL comes from the stack config together:baseUrl: set it to an http(s) URL "
            "(`pulumi config set together:baseUrl https://api.together.ai`), or remove it for the default"
        )
    later = f"a together:baseUrl set since then counts only after `{config.RECORD_CONFIG}`"
    if source == "together:baseUrl" and recorded:
        return (
            f"{_RECORDED.format(what='base URL')}: if together:baseUrl has changed since, run "
            f"`{config.RECORD_CONFIG}` to record the new one, then run the command again; if not, check that URL "
            "and the network"
        )
    if source == "together:baseUrl":
        return (
            "The URL comes from the stack config together:baseUrl: check it and the network, then run the "
            "command again"
        )
    if source == "TOGETHER_BASE_URL":
        where = (
            "the stack's provider recorded no together:baseUrl at its last deployment"
            if recorded
            else "together:baseUrl is not set"
        )
        tail = f" ({later})" if recorded else ""
        return (
            f"The URL comes from the environment variable TOGETHER_BASE_URL ({where}): check it and the network, "
            f"then run the command again{tail}"
        )
    tail = f" ({later})" if recorded else ""
    return (
        f"The URL is the default, {_default_base_url()}: check the network, then run the command again{tail}"
    )


def api_key_todo(source: str | None, *, recorded: bool = False) -> str:
    """What to do about a rejected key, naming the setting it came from.

    ``recorded``: the operation may have been configured from the stack config recorded at the last deployment
    (see :data:`_RECORDED`): a rotated ``together:apiKey`` is not the key it used, and setting it again would
    change nothing.
    """
    if source == "TOGETHER_API_KEY" and recorded:
        return (
            "The key comes from the environment variable TOGETHER_API_KEY (the stack's provider recorded no "
            "together:apiKey at its last deployment): set it to a valid key and run the command again (a "
            f"together:apiKey set since then counts only after `{config.RECORD_CONFIG}`)"
        )
    if source == "TOGETHER_API_KEY":
        return (
            "The key comes from the environment variable TOGETHER_API_KEY (together:apiKey is not set): set it to "
            "a valid key, or set the stack's key with `pulumi config set --secret together:apiKey <key>`, then run "
            "the command again"
        )
    if recorded:
        # One sentence for a rotation (together:apiKey already holds the new key: only the command is needed)
        # and for a key that is plainly wrong (set a valid one first): the provider cannot tell them apart.
        return (
            f"{_RECORDED.format(what='key')}: with a valid key in together:apiKey (set it first if it is wrong), "
            f"run `{config.RECORD_CONFIG}` to record it, then run the command again"
        )
    return (
        "The key comes from the stack config together:apiKey: set a valid key with "
        "`pulumi config set --secret together:apiKey <key>`, then run the command again"
    )


def _default_base_url() -> str:
    return config.DEFAULT_BASE_URL


def _api_host() -> str:
    """The host (and port) the client talks to, without any user:password part, for "could not be reached"."""
    url = config.current().base_url or _default_base_url()
    try:
        netloc = urlsplit(url).netloc
    except ValueError:  # a malformed URL never gets this far (the client refuses it), but never fail here
        return "the configured base URL"
    return netloc.rpartition("@")[2] or url


def explain(exc: BaseException, doing: str = "", audience: Audience = STACK) -> tuple[str, str]:
    """(cause, what to do) for an exception raised by the client or a wait; the "what to do" is never empty,
    and says what ``audience`` can do (:data:`STACK` by default).

    ``doing`` ("creating", "adopting", "deleting", ...) picks the advice where it depends on the operation:
    which timeout to raise, what to check when an adopt fails, and whether a rejected key or an unreachable
    base URL may be the copy recorded at the last deployment (anything but a create or an adopt).
    """
    adopting = doing == "adopting"
    if getattr(exc, "maybe_created", False):
        # The client could not tell whether the create happened and did not resend it. Running `pulumi up`
        # blindly could make a second object: the user must look first (the message says where and what).
        return str(exc), (
            "Before running `pulumi up` again, look for it as the message says: if it exists, set adopt_id to "
            "its id to take it over (or stop it); if it does not, run `pulumi up` again"
        )
    if isinstance(exc, UserError):
        return exc.cause, exc.todo or audience.unexpected
    # A create or an adopt runs only in `pulumi up`, after the program declared the provider with the current
    # stack config; anything else (a read, whose caller passes no `doing`, or a delete) may run on the copy
    # recorded at the last deployment.
    recorded = doing not in ("creating", "adopting")
    if isinstance(exc, errors.Unauthorized):
        return f"the API rejected the key (HTTP 401: {exc.message or 'no message'})", audience.key(recorded)
    if isinstance(exc, errors.PermissionDenied):
        return f"the key may not do this (HTTP 403: {exc.message or 'no message'})", audience.forbidden
    if isinstance(exc, errors.RateLimited):
        return f"the API refused it for now (HTTP 429: {exc.message or 'no message'})", audience.throttled
    if isinstance(exc, errors.BadRequest):
        param = f", param {exc.param}" if exc.param else ""
        return f"the API rejected the request (HTTP {exc.status}{param}: {exc.message or 'no message'})", (
            audience.rejected
        )
    if isinstance(exc, errors.NotFound) and _collection(getattr(exc, "path", None)):
        # A collection that is not there: this base URL is not (or no longer) the Together RL API.
        at = f" at {host}" if (host := audience.host()) else ""
        return f"the API{at} answered HTTP 404 for {exc.path}: it is not the Together RL API", (
            audience.base_url(True, recorded)
        )
    if isinstance(exc, errors.NotFound):
        return f"the API answered HTTP 404: {exc.message or 'not found'}", (
            "Check adopt_id, or remove it to create a new object"
            if adopting
            else "Run `pulumi refresh` to drop objects that no longer exist, then run the command again"
        )
    if isinstance(exc, errors.Conflict):
        message = exc.message or "no message"
        return f"the API refused it in the object's current state (HTTP 409: {message})", audience.conflict
    if isinstance(exc, errors.ServerError):
        return f"the API failed (HTTP {exc.status}: {exc.message or 'no message'})", audience.later
    if isinstance(exc, errors.ApiError):
        return f"the API answered HTTP {exc.status}: {exc.message or 'no message'}", audience.rerun
    if isinstance(exc, errors.ApiConnectionError):
        # The host is named: after a change of together:baseUrl it shows the old endpoint is the one tried.
        at = f" at {host}" if (host := audience.host()) else ""
        return f"the API{at} could not be reached ({exc})", audience.base_url(True, recorded)
    if isinstance(exc, errors.ConfigurationError):
        return audience.configuration(exc)
    if isinstance(exc, WaitTimeout):
        state = exc.description.split(": ", 1)[-1]  # the message already names the kind and id
        cause = f"timed out after {format_elapsed(exc.timeout)}; last state: {state}"
        if doing == "deleting":
            return cause, f"Raise {exc.limit or 'delete_timeout'} and run the command again"
        return cause, (
            f"If it is waiting in a capacity queue, raise {exc.limit or 'create_timeout'}; then run `pulumi up` again"
        )
    if isinstance(exc, WaitFailed):
        alternative = ", or remove adopt_id to create a new one" if adopting else ""
        if exc.last is None:
            return "the API answered 404 (not found) for it", (
                "It may have been deleted outside Pulumi, or the API is lagging: run `pulumi up` again"
                + alternative
            )
        state = exc.description.split(": ", 1)[-1]  # the message already names the kind and id
        if exc.code or exc.api_message:
            detail = f" with {exc.code or 'an error'}: {exc.api_message or 'no message'}"
            todo = "Fix the cause the API's error gives (inputs, capacity, quota), then run `pulumi up` again"
        else:
            detail = ""
            todo = "Look up why in the API (its status and error), fix that, then run `pulumi up` again"
        return f"it reached {state}{detail}", todo + alternative
    return f"{type(exc).__name__}{_location(exc)}: {str(exc) or 'no message'}", audience.unexpected


def _location(exc: BaseException) -> str:
    """`` at module.py:123 in function`` of the innermost frame: a bug's cause must say where it happened,
    even once it is one sentence."""
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    if not frames:
        return ""
    last = frames[-1]
    return f" at {os.path.basename(last.filename)}:{last.lineno} in {last.name}"


def is_bug(exc: BaseException | None) -> bool:
    """Whether ``exc`` is a bug rather than a failure this project explains (the API, a wait, the user)."""
    known = (UserError, errors.TogetherError, WaitError)
    return exc is not None and isinstance(exc, Exception) and not isinstance(exc, known)


_COLLECTIONS = ("/v1/rl/model-resources", "/v1/rl/training-sessions", "/v1/rl/supported-models")


def _collection(path: str | None) -> bool:
    """Whether ``path`` is a collection (a list, or a create), which exists whatever objects do."""
    return path is not None and path.split("?", 1)[0].rstrip("/") in _COLLECTIONS


def _configuration_cause(exc: BaseException) -> str:
    # The client's message carries its own prefix and advice; keep only what went wrong. The client was handed
    # the stack's base URL as an argument: the sentence names the setting the user wrote it in.
    message = str(exc).removeprefix("creating the Together RL client: ")
    message = message.replace("(from the base_url argument)", f"(from {_base_url_setting()})")
    return re.sub(r"\.\s*Check [^.]*\.?$", "", message).strip()


def _base_url_setting() -> str:
    source = config.current().base_url_from
    if source == config.ENV_BASE_URL:
        return f"the environment variable {config.ENV_BASE_URL}"
    return f"the stack config {source or config.CONFIG_BASE_URL}"


class WaitError(Exception):
    """Base of the two ways a wait ends without reaching its target."""

    def __init__(self, message: str, *, last: Any, description: str, elapsed: float) -> None:
        super().__init__(message)
        self.last = last
        self.description = description
        self.elapsed = elapsed


class WaitFailed(WaitError):
    """The object reached a state from which the target cannot be reached.

    ``code`` and ``message_from_api`` are the object's ``error.code`` / ``error.message`` when it has an error.
    """

    def __init__(self, *, last: Any, description: str, elapsed: float) -> None:
        error = getattr(last, "error", None)
        self.code: str | None = getattr(error, "code", None) or None
        self.api_message: str | None = getattr(error, "message", None) or None
        detail = ""
        if self.code or self.api_message:
            detail = f" with {self.code or 'an error'}: {self.api_message or 'no message'}"
        super().__init__(
            f"{description}{detail} after {format_elapsed(elapsed)}",
            last=last,
            description=description,
            elapsed=elapsed,
        )


class WaitTimeout(WaitError):
    """``timeout`` seconds passed before the target state was reached."""

    def __init__(
        self, *, last: Any, description: str, elapsed: float, timeout: float, limit: str | None = None
    ) -> None:
        self.timeout = timeout
        self.limit = limit
        """The setting ``timeout`` came from (``create_timeout``, ``customTimeouts.create``), when known."""
        super().__init__(
            f"timed out after {format_elapsed(timeout)}; last state: {description}",
            last=last,
            description=description,
            elapsed=elapsed,
        )


def command(args: str) -> str:
    """How a line tells the user to run this package's command (``args``: ``recover --stack dev``), so that it
    works where they are: in a uv project (the program's venv is uv's) ``uv run python -m pulumi_together_rl``
    (a bare ``python`` there is not the project's); in another venv, that venv's Python (relative to the working
    folder when it is below it); else ``python -m pulumi_together_rl``."""
    return f"{_python()} -m pulumi_together_rl {args}"


def _python() -> str:
    if sys.prefix == sys.base_prefix:
        return "python"
    try:
        with open(os.path.join(sys.prefix, "pyvenv.cfg"), encoding="utf-8") as cfg:
            made_by_uv = any(line.split("=", 1)[0].strip() == "uv" for line in cfg)
    except OSError:
        made_by_uv = False
    if made_by_uv:
        return "uv run python"
    here = os.getcwd()
    python = os.path.join(sys.prefix, "bin", "python")
    inside = os.path.commonpath([here, sys.prefix]) == here
    return os.path.relpath(python, here) if inside else python


def format_elapsed(seconds: float) -> str:
    """``0.2 s``, ``40 s``, ``12 min 5 s``: short, for progress lines and messages."""
    if 0 < seconds < 10:
        return f"{seconds:.1f}".rstrip("0").rstrip(".") + " s"
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds} s"
    minutes, rest = divmod(seconds, 60)
    return f"{minutes} min {rest} s" if rest else f"{minutes} min"


def until(seconds_from_now: float, now: Callable[[], datetime] | None = None) -> str:
    """The UTC wall-clock time ``seconds_from_now`` from now, for a line that says how long something goes on:
    ``14:03:12 UTC``, with the date (``2026-12-01 14:03:12 UTC``) when that is not today (UTC).

    ``now`` returns the current time (default ``datetime.now(timezone.utc)``; a naive one is taken as UTC).
    Raises :class:`OverflowError` for a moment past what a ``datetime`` holds (an infinite timeout).
    """
    current = now() if now is not None else datetime.now(timezone.utc)
    current = (
        current.replace(tzinfo=timezone.utc) if current.tzinfo is None else current.astimezone(timezone.utc)
    )
    deadline = current + timedelta(seconds=max(0.0, float(seconds_from_now)))
    if deadline.date() == current.date():
        return deadline.strftime("%H:%M:%S UTC")
    return deadline.strftime("%Y-%m-%d %H:%M:%S UTC")


UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
"""Control characters (Unicode category Cc: C0, DEL, C1) and the line and paragraph separators, which some
terminals and log viewers also break lines at. :func:`printable` escapes them; check refuses them in ids and
names."""
_UNPRINTABLE_RUNS = re.compile(f"({UNPRINTABLE.pattern})")  # split() keeps each control character apart

_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

LOG_LINE_LIMIT = 1000
"""The longest line :func:`log` writes (characters): enough for any message of the provider's own and an API
message, never a screenful of an over-long id."""


def printable(text: str, limit: int = 200) -> str:
    """``text`` as one harmless line of at most ``limit`` characters, for printing a name, an id or an API
    message that this process did not write.

    Control characters are shown escaped (``\\x1b``, ``\\n``, ``\\u2028``): printed as they are, an ANSI
    sequence could recolour or clear the user's terminal or CI log, and a newline could forge a line of its
    own ("warning: ..."). Text over ``limit`` ends in ``…``; an escape is never cut in two. State written by
    an older release can hold names that today's check would refuse, so this is applied at print time too.
    """
    if limit < 1:
        raise ValueError("limit must be at least 1")
    out: list[str] = []
    escapes: list[tuple[int, int]] = []  # where each escape lies in the result, so a cut can avoid them
    length = 0
    for part in _UNPRINTABLE_RUNS.split(text):  # plain runs and single control characters, in turn
        if UNPRINTABLE.fullmatch(part):
            shown = _escape(part)
            escapes.append((length, length + len(shown)))
        else:
            shown = part
        out.append(shown)
        length += len(shown)
    line = "".join(out)
    if len(line) <= limit:
        return line
    cut = limit - 1  # room for the ellipsis
    for start, end in escapes:
        if start < cut < end:
            cut = start
            break
    return line[:cut] + "…"


def _escape(char: str) -> str:
    code = ord(char)
    return _NAMED_ESCAPES.get(char) or (f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}")


SECRET = "[secret]"
"""How a line or a sentence shows the value of an input that arrived secret."""

_hidden: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    "pulumi_together_rl_hidden", default=()
)

HIDDEN_MIN = 4
"""The shortest value :func:`hide` looks for: a shorter secret would blank out pieces of ordinary words, so where a
short one could be printed (the subject of a create) it is replaced at the source."""

PREFIX_MIN = 8
"""The shortest beginning of a hidden value that :func:`hide` also hides: ids are quoted by their first 8
characters (``3f2a9c1e…``)."""


@contextlib.contextmanager
def hiding(values: Iterable[str]) -> Iterator[None]:
    """Inside (this context and the threads it hands its context to): every line :func:`progress_line` writes and
    every :class:`UserError` shows ``values`` (the secret inputs of an operation) as :data:`SECRET`, whole or by
    a beginning of :data:`PREFIX_MIN` characters or more."""
    extra = tuple(v for v in values if isinstance(v, str) and len(v) >= HIDDEN_MIN)
    token = _hidden.set(_hidden.get() + extra)
    try:
        yield
    finally:
        _hidden.reset(token)


def hide(text: str) -> str:
    """``text`` with every value of :func:`hiding` (and every beginning of one that is at least
    :data:`PREFIX_MIN` long) replaced by :data:`SECRET`."""
    values = _hidden.get()
    if not values:
        return text
    for value in sorted(values, key=len, reverse=True):
        text = text.replace(value, SECRET)
        for end in range(len(value) - 1, PREFIX_MIN - 1, -1):
            if value[:end] in text:
                text = text.replace(value[:end], SECRET)
    return text


_output_lock = threading.Lock()

Sink = Callable[[str, bool], None]
"""Where one operation's lines go instead of stderr: (line, status) with ``status`` true for a wait's progress
(what the object is doing now), false for what happened (a stop after a failure, a warning)."""

_sink: contextvars.ContextVar[Sink | None] = contextvars.ContextVar("pulumi_together_rl_sink", default=None)


@contextlib.contextmanager
def lines_to(sink: Sink) -> Iterator[None]:
    """Route the stderr lines of this context (an operation, and the threads it hands its context to, such as
    ``asyncio.to_thread``) to ``sink``."""
    token = _sink.set(sink)
    try:
        yield
    finally:
        _sink.reset(token)


def progress_line(line: str, out: IO[str] | None = None, *, status: bool = False) -> None:
    """Write one whole line (stderr by default): one write under a lock, so the lines of waits and creates
    running in parallel threads never interleave mid-line (``print`` writes the text and the newline apart).
    Every line goes through :func:`printable` (at most :data:`LOG_LINE_LIMIT` characters): it can hold names,
    ids and messages from the state or the API, and a line is one line. A line for stderr goes to the
    operation's sink where a face set one (:func:`lines_to`); ``status`` marks a wait's progress. Nothing it
    meets is raised: a sink that fails falls back to stderr, and a stream that fails loses the line."""
    text = printable(hide(line), LOG_LINE_LIMIT)
    sink = _sink.get()
    if sink is not None and (out is None or out is sys.stderr):
        try:
            sink(text, status)
            return
        except Exception:  # a line is a courtesy: a sink that fails goes to stderr instead
            pass
    stream = out if out is not None else sys.stderr
    try:
        with _output_lock:
            stream.write(text + "\n")
            stream.flush()
    except Exception:  # a closed stream, a broken pipe: a line never fails a deployment, it is lost
        pass


log = progress_line
"""One progress or warning line on stderr (the Pulumi CLI shows a dynamic provider's stderr)."""
