"""What the user reads when something goes wrong: :class:`ProviderError`, :func:`explain` and :func:`log`.

* Every user-facing error is a :class:`ProviderError` whose message follows the project grammar
  ``<doing what> <kind> (<id>): <cause>. <what to do>``.
* :func:`explain` turns an exception raised by the client or a wait into that cause and "what to do".
* :func:`log` writes one progress or warning line on stderr, which the Pulumi CLI shows, made one harmless
  line first (:func:`~..waiting.printable`: control characters escaped, over-long text shortened).
"""

from __future__ import annotations

import os
import re
import traceback
from urllib.parse import urlsplit

from .. import config
from ..client import errors
from ..waiting import WaitFailed, WaitTimeout, format_elapsed, progress_line


class ProviderError(Exception):
    """An error shown to the user: ``<doing> <kind> (<ident>): <cause>. <todo>``."""

    def __init__(self, doing: str, kind: str, ident: str | None, cause: str, todo: str = "") -> None:
        self.doing, self.kind, self.ident, self.cause, self.todo = doing, kind, ident, cause, todo
        where = f" ({ident})" if ident else ""
        tail = f" {todo.rstrip('.')}." if todo else ""
        super().__init__(f"{doing} {kind}{where}: {cause.rstrip('.')}.{tail}")


RERUN = "Run the command again"
UNEXPECTED_TODO = (
    "Run the command again; if it fails the same way, report it as a bug of pulumi-together-rl, "
    "with this message"
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
    # Imported here: the client's module (and httpx) loads only where a client is used, as in _base.api_client.
    from ..client.api import DEFAULT_BASE_URL

    return DEFAULT_BASE_URL


def _api_host() -> str:
    """The host (and port) the client talks to, without any user:password part, for "could not be reached"."""
    url = config.current().base_url or _default_base_url()
    try:
        netloc = urlsplit(url).netloc
    except ValueError:  # a malformed URL never gets this far (the client refuses it), but never fail here
        return "the configured base URL"
    return netloc.rpartition("@")[2] or url


def explain(exc: BaseException, doing: str = "") -> tuple[str, str]:
    """(cause, what to do) for an exception raised by the client or a wait; the "what to do" is never empty.

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
    if isinstance(exc, ProviderError):
        return exc.cause, exc.todo or UNEXPECTED_TODO
    # A create or an adopt runs only in `pulumi up`, after the program declared the provider with the current
    # stack config; anything else (a read, whose caller passes no `doing`, or a delete) may run on the copy
    # recorded at the last deployment.
    recorded = doing not in ("creating", "adopting")
    if isinstance(exc, errors.Unauthorized):
        return f"the API rejected the key (HTTP 401: {exc.message})", api_key_todo(
            config.current().api_key_from, recorded=recorded
        )
    if isinstance(exc, errors.PermissionDenied):
        return f"the key may not do this (HTTP 403: {exc.message})", "Use a key of the project that owns it"
    if isinstance(exc, errors.RateLimited):
        return f"the API refused it for now (HTTP 429: {exc.message})", (
            "Wait and run `pulumi up` again; if a session cap is reached, stop a session on that model resource"
        )
    if isinstance(exc, errors.BadRequest):
        param = f", param {exc.param}" if exc.param else ""
        return f"the API rejected the request (HTTP {exc.status}{param}: {exc.message})", (
            "Fix that input and run `pulumi up` again"
        )
    if isinstance(exc, errors.NotFound) and _collection(getattr(exc, "path", None)):
        # A collection that is not there: this base URL is not (or no longer) the Together RL API.
        return f"the API at {_api_host()} answered HTTP 404 for {exc.path}: it is not the Together RL API", (
            base_url_todo(config.current().base_url_from, unreachable=True, recorded=recorded)
        )
    if isinstance(exc, errors.NotFound):
        return f"the API answered HTTP 404: {exc.message or 'not found'}", (
            "Check adopt_id, or remove it to create a new object"
            if adopting
            else "Run `pulumi refresh` to drop objects that no longer exist, then run the command again"
        )
    if isinstance(exc, errors.Conflict):
        message = exc.message or "no message"
        return f"the API refused it in the object's current state (HTTP 409: {message})", (
            "Check the object's status, then run the command again"
        )
    if isinstance(exc, errors.ServerError):
        return f"the API failed (HTTP {exc.status}: {exc.message or 'no message'})", (
            "Run the command again in a few minutes"
        )
    if isinstance(exc, errors.ApiError):
        return f"the API answered HTTP {exc.status}: {exc.message or 'no message'}", RERUN
    if isinstance(exc, errors.ApiConnectionError):
        # The host is named: after a change of together:baseUrl it shows the old endpoint is the one tried.
        return f"the API at {_api_host()} could not be reached ({exc})", base_url_todo(
            config.current().base_url_from, unreachable=True, recorded=recorded
        )
    if isinstance(exc, errors.ConfigurationError):
        return _configuration_cause(exc), (
            "Check together:apiKey / TOGETHER_API_KEY and together:baseUrl / TOGETHER_BASE_URL, then run the "
            "command again"
        )
    if isinstance(exc, WaitTimeout):
        state = exc.description.split(": ", 1)[-1]  # the message already names the kind and id
        cause = f"timed out after {format_elapsed(exc.timeout)}; last state: {state}"
        if doing == "deleting":
            return cause, "Raise delete_timeout and run the command again"
        return cause, "If it is waiting in a capacity queue, raise create_timeout; then run `pulumi up` again"
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
    return f"{type(exc).__name__}{_location(exc)}: {str(exc) or 'no message'}", UNEXPECTED_TODO


def _location(exc: BaseException) -> str:
    """`` at module.py:123 in function`` of the innermost frame: a bug's cause must say where it happened,
    even once it is one sentence."""
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    if not frames:
        return ""
    last = frames[-1]
    return f" at {os.path.basename(last.filename)}:{last.lineno} in {last.name}"


def is_bug(exc: BaseException | None) -> bool:
    """Whether ``exc`` is a bug rather than a failure the provider explains (API, wait, journal, user)."""
    from .. import journal

    known = (ProviderError, errors.TogetherError, WaitFailed, WaitTimeout, journal.Unwritable)
    return exc is not None and isinstance(exc, Exception) and not isinstance(exc, known)


_COLLECTIONS = ("/v1/rl/model-resources", "/v1/rl/training-sessions", "/v1/rl/supported-models")


def _collection(path: str | None) -> bool:
    """Whether ``path`` is a collection (a list, or a create), which exists whatever objects do."""
    return bool(path) and path.split("?", 1)[0].rstrip("/") in _COLLECTIONS


def _configuration_cause(exc: BaseException) -> str:
    # The client's message carries its own prefix and advice; keep only what went wrong.
    message = str(exc).removeprefix("creating the Together RL client: ")
    return re.sub(r"\.\s*Check [^.]*\.?$", "", message).strip()


def log(message: str) -> None:
    """One whole line on stderr (the Pulumi CLI shows a dynamic provider's stderr), never interleaved, made
    harmless by :func:`~..waiting.printable` (it can hold names and ids from the state or the API)."""
    progress_line(message)
