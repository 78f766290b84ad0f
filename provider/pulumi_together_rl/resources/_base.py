"""Plumbing shared by both resource providers: configure, the lazy client, check/diff helpers, errors, waiting.

Nothing in here holds per-resource logic; the resource modules read as "read the plan, call the client, wait,
write the result" on top of it.

* Providers hold no state: settings live in :mod:`pulumi_together_rl.config` (a process-level registry), the
  HTTP client in a per-process cache here, so the pickled provider (``__provider`` in the state) is just a class
  reference: no key, no client, the same bytes on every run.
* Every user-facing error is a :class:`ProviderError` whose message follows the project grammar
  ``<doing what> <kind> (<id>): <cause>. <what to do>``.
* ``check`` helpers validate with the resource's pydantic "validated inputs" model, turn every pydantic error
  into one ``CheckFailure`` per property path, and leave values that are unknown at preview untouched.
* The remote part of ``check`` goes through :func:`remote_check` (a quick client: short timeouts, one retry; a
  failure warns, skips, and is remembered for a minute) and runs only for new or changed inputs
  (:func:`needs_remote_check`), so an unchanged ``pulumi up`` makes no HTTP call.
* ``diff`` helpers compare canonical forms of the real inputs only; they never make HTTP calls.
* Lifecycle helpers: :func:`wait` (with a grace for read-after-write lag), :func:`look_after_refused_stop`
  (a refused stop is judged by the object's state) and :func:`abandon` (stop what a failed create made).
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar, get_args

from pulumi.dynamic import CheckFailure, ConfigureRequest, DiffResult, ResourceProvider
from pulumi.output import Unknown
from pydantic import BaseModel, BeforeValidator, Strict, ValidationError

from .. import config
from ..client import errors
from ..waiting import WaitFailed, WaitTimeout, format_elapsed, wait_for

if TYPE_CHECKING:
    from ..client.api import TogetherRL
    from ..client.models import SupportedModelList

T = TypeVar("T")

PROVIDER_KEY = "__provider"
UNKNOWN_SENTINEL = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # pulumi.runtime.rpc.UNKNOWN, without importing rpc

SUPPORTED_MODELS_TTL = 600.0
"""How long (seconds) one process trusts its copy of ``GET /v1/rl/supported-models``."""


# ------------------------------------------------------------------------------------------------ errors


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
BASE_URL_TODO = (
    "Set together:baseUrl (`pulumi config set together:baseUrl https://api.together.ai`) or TOGETHER_BASE_URL "
    "to an http(s) URL, or unset both for the default"
)


def explain(exc: BaseException, doing: str = "") -> tuple[str, str]:
    """(cause, what to do) for an exception raised by the client or a wait; the "what to do" is never empty.

    ``doing`` ("creating", "adopting", "deleting", ...) picks the advice where it depends on the operation:
    which timeout to raise, and what to check when an adopt fails.
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
    if isinstance(exc, errors.Unauthorized):
        return f"the API rejected the key (HTTP 401: {exc.message})", (
            "Check together:apiKey (`pulumi config set --secret together:apiKey <key>`) or TOGETHER_API_KEY"
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
        return f"the API could not be reached ({exc})", (
            "Check together:baseUrl / TOGETHER_BASE_URL and the network, then run the command again"
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
    return f"{type(exc).__name__}: {exc}", UNEXPECTED_TODO


def _configuration_cause(exc: BaseException) -> str:
    # The client's message carries its own prefix and advice; keep only what went wrong.
    message = str(exc).removeprefix("creating the Together RL client: ")
    return re.sub(r"\.\s*Check [^.]*\.?$", "", message).strip()


def log(message: str) -> None:
    """One line on stderr: the Pulumi CLI shows a dynamic provider's stderr."""
    try:
        print(message, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


# ------------------------------------------------------------------------------------ provider base + client


class BaseProvider(ResourceProvider):
    """Stateless provider base: ``configure`` records the stack config in :mod:`config`, never on ``self``.

    ``__getstate__`` returns an empty dict, so the dill blob is a bare class reference whatever happens to the
    instance (deterministic: no spurious ``~__provider`` diffs).
    """

    def configure(self, req: ConfigureRequest) -> None:
        config.configure(req.config)

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        pass


CHECK_MAX_ATTEMPTS = 2
"""Attempts per request of the remote part of ``check``: a preview must not hang on an unreachable API."""

CHECK_READ_TIMEOUT = 5.0
"""Read timeout (seconds) of the remote part of ``check`` (connecting gets as long at most)."""

CHECK_MAX_RETRY_AFTER = 2.0
"""The longest ``Retry-After`` (seconds) the remote part of ``check`` honours before its one retry."""

REMOTE_CHECK_BACKOFF = 60.0
"""After a remote check fails to reach the API, the next ones in this process skip it for this long (seconds),
so a preview of many resources pays the failure once."""

_client_lock = threading.Lock()
_clients: dict[tuple[str, str | None, bool], TogetherRL] = {}


def api_client(doing: str, kind: str, ident: str | None, *, quick: bool = False) -> TogetherRL:
    """The process's client for the current settings (built lazily, shared by all threads).

    ``quick`` gives a client with one retry, a short read timeout and a short ``Retry-After`` cap, for the
    optional remote checks. A client that cannot be built (a malformed base URL) is a :class:`ProviderError`.
    """
    settings = config.current()
    if not settings.api_key:
        raise ProviderError(doing, kind, ident, "no Together API key is configured", config.MISSING_KEY_HINT)
    cache_key = (settings.api_key, settings.base_url, quick)
    with _client_lock:
        client = _clients.get(cache_key)
        if client is None:
            from ..client.api import TogetherRL

            extra: dict[str, Any] = {}
            if quick:
                extra = {
                    "max_attempts": CHECK_MAX_ATTEMPTS,
                    "timeout": CHECK_READ_TIMEOUT,
                    "max_retry_after": CHECK_MAX_RETRY_AFTER,
                }
            try:
                client = TogetherRL(api_key=settings.api_key, base_url=settings.base_url, **extra)
            except errors.ConfigurationError as exc:
                raise ProviderError(doing, kind, ident, _configuration_cause(exc), BASE_URL_TODO) from exc
            _clients[cache_key] = client
    return client


_supported_lock = threading.Lock()
_supported: dict[str | None, tuple[float, SupportedModelList]] = {}
_resource_facts: dict[tuple[str | None, str], dict[str, Any]] = {}


def supported_models(client: TogetherRL) -> SupportedModelList:
    """``GET /v1/rl/supported-models``, cached per process for :data:`SUPPORTED_MODELS_TTL` seconds."""
    base_url = config.current().base_url
    now = time.monotonic()
    with _supported_lock:
        cached = _supported.get(base_url)
        if cached and now - cached[0] < SUPPORTED_MODELS_TTL:
            return cached[1]
    models = client.list_supported_models()
    with _supported_lock:
        _supported[base_url] = (now, models)
    return models


def resource_facts(client: TogetherRL, resource_id: str) -> dict[str, Any]:
    """The immutable facts of a model resource a session check needs (cached: they never change)."""
    key = (config.current().base_url, resource_id)
    with _supported_lock:
        if key in _resource_facts:
            return _resource_facts[key]
    mr = client.get_model_resource(resource_id)
    facts = {
        "base_model": mr.base_model,
        "gpu_type": mr.compute_config.gpu_type.value if mr.compute_config.gpu_type else None,
        "lora_enabled": mr.lora_enabled,
    }
    with _supported_lock:
        _resource_facts[key] = facts
    return facts


def clear_caches() -> None:
    """Forget clients and cached API answers (tests)."""
    with _client_lock:
        for client in _clients.values():
            try:
                client.close()
            except Exception:
                pass
        _clients.clear()
    with _supported_lock:
        _supported.clear()
        _resource_facts.clear()
        _remote_failures.clear()


_REMEMBERED_FAILURES = (
    errors.ApiConnectionError,
    errors.ServerError,
    errors.RateLimited,
    errors.Unauthorized,
    errors.PermissionDenied,
)
_remote_failures: dict[tuple[str | None, str | None], tuple[float, str]] = {}


def remote_check(kind: str, ident: str | None, call: Callable[[TogetherRL], T]) -> T | None:
    """Run the remote part of a ``check``: ``call(client)`` with the quick client, or ``None`` if it was skipped.

    Without a key, with a client that cannot be built, or when the API cannot be asked, it warns on stderr and
    skips instead of failing the preview. A failure to reach the API (unreachable, timeout, 5xx, 429, 401/403)
    is remembered for :data:`REMOTE_CHECK_BACKOFF` seconds: later checks in this process skip at once (each
    still warns, so every resource says its remote checks were skipped).
    """
    settings = config.current()
    key = (settings.api_key, settings.base_url)
    now = time.monotonic()
    with _supported_lock:
        remembered = _remote_failures.get(key)
    if remembered is not None and now - remembered[0] < REMOTE_CHECK_BACKOFF:
        seen = format_elapsed(now - remembered[0])
        _warn_remote_check_skipped(kind, ident, f"{remembered[1]} ({seen} ago; not asked again for now)")
        return None
    try:
        return call(api_client("checking", kind, ident, quick=True))
    except ProviderError as exc:  # no key, or a client that cannot be built
        _warn_remote_check_skipped(kind, ident, exc.cause)
    except errors.TogetherError as exc:  # unreachable, refused: warn, don't fail
        cause, _ = explain(exc)
        if isinstance(exc, _REMEMBERED_FAILURES):
            with _supported_lock:
                _remote_failures[key] = (time.monotonic(), cause)
        _warn_remote_check_skipped(kind, ident, cause)
    return None


def _warn_remote_check_skipped(kind: str, ident: str | None, cause: str) -> None:
    log(
        f"warning: checking {kind} ({ident}) against the API: {cause}. Skipped the remote checks "
        "(supported model, rank and replica limits); they run again at `pulumi up`."
    )


def needs_remote_check(olds: Mapping[str, Any], inputs: Mapping[str, Any], keys: Iterable[str]) -> bool:
    """Whether ``check`` should ask the API: for a new resource (no previous inputs), or when one of ``keys``
    (the inputs the remote checks look at) changed. An unchanged ``pulumi up`` thus makes no HTTP call, even
    in a fresh provider process whose caches are empty."""
    if not any(k != PROVIDER_KEY for k in olds):
        return True
    return bool(changed_keys(olds, inputs, keys))


# --------------------------------------------------------------------------------------- unknowns + shapes


def is_unknown(value: Any) -> bool:
    return isinstance(value, Unknown) or (isinstance(value, str) and value == UNKNOWN_SENTINEL)


def contains_unknown(value: Any) -> bool:
    if is_unknown(value):
        return True
    if isinstance(value, Mapping):
        return any(contains_unknown(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(contains_unknown(v) for v in value)
    return False


def canonical(value: Any, *, top: bool = True) -> Any:
    """The comparable form of an input: ``None`` entries dropped, whole floats as ints, and an empty object at
    the top equal to an unset input (``compute_config={}`` means the defaults). Nested empty objects are kept:
    ``{"adam": {}}`` and ``{"muon": {}}`` differ."""
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if key == PROVIDER_KEY or item is None:
                continue
            out[key] = canonical(item, top=False)
        return (out or None) if top else out
    if isinstance(value, (list, tuple)):
        return [canonical(v, top=False) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def drop_none(value: Any) -> Any:
    """``value`` without ``None`` entries (the wire drops them anyway; do it here so outputs are stable)."""
    if isinstance(value, Mapping):
        return {k: drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_none(v) for v in value]
    return value


def pick(props: Mapping[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    """The entries of ``props`` named in ``keys`` that are set."""
    return {k: props[k] for k in keys if props.get(k) is not None}


def iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def short_id(ident: str) -> str:
    return ident if len(ident) <= 12 else ident[:8] + "…"


# --------------------------------------------------------------------------------------------------- check


def _whole(value: Any) -> Any:
    # Numbers cross the Pulumi wire as doubles: 32 arrives as 32.0. Take whole floats back to ints.
    return int(value) if isinstance(value, float) and value.is_integer() else value


WholeInt = Annotated[int, Strict(), BeforeValidator(_whole)]
"""An integer input: whole floats (from the wire) become ints; bools, strings and fractions are rejected."""


def validate_inputs(
    model: type[BaseModel],
    news: Mapping[str, Any],
    *,
    required: Iterable[str],
    hints: Mapping[str, str],
) -> tuple[dict[str, Any], list[CheckFailure]]:
    """Validate ``news`` with ``model``: (normalised inputs, one failure per bad property path).

    Values unknown at preview are left out of validation and put back unchanged; a required property that is
    unknown is fine. On failure the inputs come back as given.
    """
    props = {k: v for k, v in news.items() if k != PROVIDER_KEY and v is not None}
    known, unknowns = _split_unknowns(props, ())
    failures: list[CheckFailure] = []
    seen: set[str] = set()
    for name in required:
        if name not in props:
            failures.append(CheckFailure(name, f"{name} is required. {hints.get(name, '')}".strip()))
            seen.add(name)
    try:
        validated = model.model_validate(known)
    except ValidationError as exc:
        for err in exc.errors():
            path = ".".join(str(part) for part in err["loc"])
            if path not in seen:
                seen.add(path)
                failures.append(CheckFailure(path, _reason(err, path, hints, model)))
        return props, failures
    if failures:
        return props, failures
    inputs = drop_none(validated.model_dump(mode="json", exclude_unset=True))
    for path, value in unknowns:
        target = inputs
        for part in path[:-1]:
            target = target.setdefault(part, {})
        target[path[-1]] = value
    return inputs, failures


def _split_unknowns(value: Mapping[str, Any], path: tuple[str, ...]) -> tuple[dict[str, Any], list]:
    known: dict[str, Any] = {}
    unknowns: list[tuple[tuple[str, ...], Any]] = []
    for key, item in value.items():
        if contains_unknown(item) and isinstance(item, Mapping) and not is_unknown(item):
            known[key], inner = _split_unknowns(item, (*path, key))
            unknowns.extend(inner)
        elif contains_unknown(item):
            unknowns.append(((*path, key), item))
        elif item is not None:
            known[key] = item
    return known, unknowns


def _reason(err: Mapping[str, Any], path: str, hints: Mapping[str, str], model: type[BaseModel]) -> str:
    kind = err["type"]
    parent = path.rpartition(".")[0]
    if kind == "extra_forbidden":
        where = " from " + parent if parent else ""
        hint = hints.get(parent, "")
        return f"{path} is not a known input. Remove it{where} (check the spelling). {hint}".strip()
    nested = _model_at(model, err["loc"])
    if kind in ("model_type", "model_attributes_type", "dict_type") and nested is not None:
        keys = list(nested.model_fields)
        message = (
            f"should be an object with keys {', '.join(keys)}" if keys else "should be an empty object {}"
        )
    elif kind == "value_error":
        message = str(err.get("ctx", {}).get("error", ""))
    else:
        message = err["msg"]
    # Never show the names of the validation classes (_LoraConfig ...): they mean nothing to the user.
    message = re.sub(r"(?:or )?(?:an )?instance of _?[A-Z]\w*", "", message).strip().rstrip(",")
    message = message[0].lower() + message[1:] if message else "invalid value"
    got = repr(err.get("input"))
    got = got if len(got) <= 60 else got[:57] + "..."
    hint = hints.get(path) or hints.get(parent, "")
    return f"{path}: {message} (got {got}). {hint}".strip()


def _model_at(model: type[BaseModel], loc: Iterable[Any]) -> type[BaseModel] | None:
    """The pydantic model validating the value at ``loc`` (None if that value is not an object)."""
    current: type[BaseModel] | None = model
    for part in loc:
        field = current.model_fields.get(str(part)) if current is not None else None
        if field is None:
            return None
        current = _inner_model(field.annotation)
    return current


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


# ---------------------------------------------------------------------------------------------------- diff


def changed_keys(olds: Mapping[str, Any], news: Mapping[str, Any], keys: Iterable[str]) -> list[str]:
    """Input keys whose value differs (canonical forms; an unknown new value always counts as a change)."""
    return [
        k for k in keys if contains_unknown(news.get(k)) or canonical(olds.get(k)) != canonical(news.get(k))
    ]


def diff_inputs(
    olds: Mapping[str, Any],
    news: Mapping[str, Any],
    *,
    replace_on_changes: tuple[str, ...],
    update_in_place: tuple[str, ...],
) -> DiffResult:
    """``DiffResult`` over the real inputs only: never ``__provider``, never outputs or server-filled values.

    Replacement is always delete-before-replace (see each resource's module docstring for why).
    """
    changed = changed_keys(olds, news, (*replace_on_changes, *update_in_place))
    replaces = [k for k in changed if k in replace_on_changes]
    return DiffResult(
        changes=bool(changed),
        replaces=replaces,
        stables=[],
        delete_before_replace=True if replaces else None,
    )


# ------------------------------------------------------------------------------------------------- waiting


def get_or_none(getter: Callable[[str], T], ident: str) -> T | None:
    """``getter(ident)``, with 404 as ``None`` (not-found is a state)."""
    try:
        return getter(ident)
    except errors.NotFound:
        return None


NOT_FOUND_GRACE = 60.0
"""Seconds after a create during which a 404 for the new object means "not visible yet" (read-after-write lag
of the API), not "gone": the create wait keeps polling that long (or until ``create_timeout``)."""

ABANDON_STOP_RETRY_DELAYS = (0.5, 1.0, 2.0, 4.0)
"""Pauses (seconds) between the retries of a stop that answers 404 after a failed create (the object was just
made, so a 404 may be read-after-write lag rather than proof it is gone)."""


def wait(
    fetch: Callable[[], T | None],
    *,
    done: Callable[[T | None], bool],
    failed: Callable[[T | None], bool],
    describe: Callable[[T | None], str],
    timeout: float,
    not_found_grace: float = 0.0,
) -> T | None:
    """:func:`waiting.wait_for` with the configured poll interval."""
    return wait_for(
        fetch,
        done=done,
        failed=failed,
        describe=describe,
        timeout=float(timeout),
        poll_interval=config.current().poll_interval,
        not_found_grace=not_found_grace,
    )


def look_after_refused_stop(
    doing: str, kind: str, ident: str, fetch: Callable[[], T | None], refusal: errors.ApiError
) -> T | None:
    """A stop was refused (409/400): GET the object to learn why. Returns it (``None`` = 404).

    The API's answer to stopping an object that is already stopped is not documented, so a refusal is judged by
    the object's state, never by the message text. If the GET fails too, the refusal is what gets reported.
    """
    try:
        return fetch()
    except Exception as exc:
        raise ProviderError(doing, kind, ident, *explain(refusal, doing)) from exc


def abandon(
    doing: str,
    kind: str,
    ident: str,
    exc: BaseException,
    *,
    stop: Callable[[], Any],
    fetch: Callable[[], Any],
    gone: Callable[[Any], bool],
    path: str,
    stopped_note: str,
) -> NoReturn:
    """After a failed create: stop what was made (best effort, logged), then raise the error naming the id.

    ``fetch`` GETs the object (``None`` = 404) and ``gone`` says whether its state counts as stopped: a stop the
    API refuses (409/400) for an object already in such a state is a success. A stop that answers 404 is retried
    (:data:`ABANDON_STOP_RETRY_DELAYS`): right after the create that may be read-after-write lag, so a lasting
    404 is reported as "may still exist", never as proof it is gone. ``path`` is the collection's API path (for
    the manual check), ``stopped_note`` what a successful stop means for billing.
    ``KeyboardInterrupt``/``SystemExit`` are re-raised as they are, after the stop."""
    stopped = _stop_after_failed_create(kind, ident, stop, fetch, gone, path, stopped_note)
    if not isinstance(exc, Exception):
        raise exc
    cause, todo = explain(exc, doing)
    raise ProviderError(doing, kind, ident, cause, f"{stopped}. {todo}") from exc


def _stop_after_failed_create(
    kind: str,
    ident: str,
    stop: Callable[[], Any],
    fetch: Callable[[], Any],
    gone: Callable[[Any], bool],
    path: str,
    stopped_note: str,
) -> str:
    """Stop the object; the sentence saying how that went."""
    by_hand = f"check it with GET {path}/{ident} and stop it if it is there (POST {path}/{ident}/stop)"
    delays = list(ABANDON_STOP_RETRY_DELAYS)
    started, attempts = time.monotonic(), 0
    while True:
        attempts += 1
        try:
            stop()
        except errors.NotFound:
            if delays:
                time.sleep(delays.pop(0))
                continue
            tried = f"{attempts} times over {format_elapsed(time.monotonic() - started)}"
            log(f"{kind} {ident}: create failed; stopping it answered 404 (not found) {tried}")
            return (
                f"It may still exist: stopping it answered 404 (not found) {tried}, which can be the API's "
                f"read-after-write lag; {by_hand}"
            )
        except (errors.Conflict, errors.BadRequest) as stop_exc:
            try:
                obj = fetch()
            except Exception:
                obj = None
            if obj is not None and gone(obj):
                state = obj.status.short
                log(f"{kind} {ident}: create failed; it is already {state}")
                return f"It is already {state}: {stopped_note}"
            stop_cause, _ = explain(stop_exc)
            log(f"{kind} {ident}: create failed and stopping it failed: {stop_cause}")
            return f"Stopping it failed too ({stop_cause}); {by_hand}"
        except Exception as stop_exc:
            stop_cause, _ = explain(stop_exc)
            log(f"{kind} {ident}: create failed and stopping it failed: {stop_cause}")
            return f"Stopping it failed too ({stop_cause}); {by_hand}"
        else:
            log(f"{kind} {ident}: create failed; stopped it")
            return f"It has been stopped: {stopped_note}"
