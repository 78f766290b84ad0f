"""The lifecycle every kind and every face goes through, written once over a :class:`~.kind.Kind`:
:func:`diff`, :func:`create` (with its adopt), :func:`read`, :func:`update`, :func:`delete`. No
``pulumi.dynamic`` here: the verbs take and return plain dicts, :class:`Made` and :class:`Found`, and raise
:class:`~..messages.UserError`.

**The ownership rule** (:mod:`..journal`): an existing object is taken over only with proof that this
declaration made it: an id the journal recorded from this declaration's own POST, or a match that is unique under
strict conditions (absent from that create's snapshot, made inside its POST's window, equal to the request with
the server's defaults, claimed by no other entry or create in flight). Ambiguous: nothing is taken, nothing is
POSTed, and the error says what was found. A failed create stops only the object its own POST (or take-over)
produced, and never once the engine is gone (:mod:`..lifeline`): then its entry keeps the id for the next run.

* **create**: one call to the create transaction (:mod:`..ownership.transaction`), which takes over what an
  interrupted create of the same declaration made or POSTs (through the client's reconciliation), records the
  id, and runs this module's settle: wait for the target with progress on stderr, keep it as declared
  (``Kind.keep``), write the outputs; on any failure after the POST it stops the object (:mod:`..stopping`) and
  raises naming it. ``adopt_id`` is the same call: the transaction takes over the object the user named (it must
  be adoptable and match what is declared, and a failed adopt never stops it).
* **read**: one list of the kind answers every read of a refresh, a GET only for what it does not show; a 404 or
  an ended object is gone (the next ``up`` recreates it; the kind says why when it can tell, such as an idle
  stop), except a 404 for an object made under a minute ago (read-after-write lag), which stays. A declared
  object is then kept as declared (``Kind.keep``: extend-expiry when due); a keep that fails is a line. An
  output that moved by sub-second jitter keeps its stored value (``Kind.steady``). With nothing declared
  (``pulumi import``, ``.get()``), an id that is not there, has ended or cannot be an id is an error naming it.
* **update**: nothing that replaces; the kind's PATCH when it has one, and its keep when an input of
  ``Kind.kept_by`` changed; else no call at all.
* **delete**: stop (through an outage; a refusal judged by the object's state; the kind explains a refusal it
  knows), then wait until it holds nothing, sending the stop again if it did not take.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from .. import stopping
from ..client import errors
from ..client.collections import Obj, Req
from ..messages import UserError, WaitTimeout, command, explain, format_elapsed, log
from ..ownership import transaction
from ..waiting import NOTHING, NoAnswerYet, Nothing, wait_for
from . import deadline, process, secrecy, watch
from .inputs import Diff, changed_keys, diff_inputs, iso, pick
from .keys import OWNER_KEY, SECRETS_KEY
from .kind import Kind, Props, State

if TYPE_CHECKING:
    from ..client.api import TogetherRL
    from ..client.errors import ApiError

NOT_FOUND_GRACE = 60.0
"""Seconds after a create during which a 404 for the new object means "not visible yet" (read-after-write lag
of the API), not "gone": the create wait keeps polling that long (or until ``create_timeout``)."""

STOP_PERSIST_WINDOW = 120.0
"""Seconds a stop after a failed create keeps trying through 429s, 5xx and connection failures (the failure
it cleans up after is often the same outage): long enough for a typical blip, bounded so a dead API still
ends the command with the id to stop by hand."""

DEADLINE_HELD_TODO = (
    "Give them a stop_after no later than this one's (`reap --stop` stops the sessions a stack holds before "
    "their model resource), or set force_stop=True"
)
"""What to do when what is attached to an object refused its stop at its deadline."""

READ_RETRY_DELAYS = (0.5, 1.0, 2.0, 4.0)
"""Pauses (seconds) between the GETs of a young object that answers 404 on refresh."""


@dataclasses.dataclass(frozen=True)
class Made:
    """What a create gives the engine: the id and the state."""

    id: str
    outputs: State


@dataclasses.dataclass(frozen=True)
class Found:
    """What a read gives the engine: the id, the state and the inputs to record (None: keep the stored ones)."""

    id: str
    outputs: State
    inputs: State | None


# ------------------------------------------------------------------------------------------------ diff


def diff(kind: Kind[Obj, Req], olds: Props, news: Props) -> Diff:
    """Over the declared inputs, from the kind's tables, and the state's deadline (:mod:`.deadline`, on this
    machine's clock); no HTTP. A moved deadline is an update while it is ahead, a replacement once it has passed
    (a new object with the new one); an object the state shows running past its deadline is an update (which
    stops it)."""
    found = diff_inputs(
        olds, news, replace_on_changes=kind.replace_on_changes, update_in_place=kind.update_in_place
    )
    now = deadline.now()
    if deadline.INPUT in found.changed and (deadline.passed(olds, now) or deadline.stopped_at(olds)):
        return Diff(True, [*found.replaces, deadline.INPUT], found.changed)
    if not found.changes and deadline.due(olds, now, _ended(kind)):
        return Diff(True, [], [deadline.INPUT])
    return found


def _ended(kind: Kind[Obj, Req]) -> frozenset[str]:
    """The short names of the kind's ended statuses, as the state records them."""
    return frozenset(status.short for status in kind.collection.ended)


# ---------------------------------------------------------------------------------------------- create


def create(kind: Kind[Obj, Req], props: Props, *, timeout: float | None = None) -> Made:
    """Create (or adopt) what ``props`` (the checked inputs) declare; see the module docstring. ``timeout``:
    Pulumi's ``customTimeouts.create`` where a face receives it (the plugin), over ``create_timeout``."""
    inputs = pick(props, (*kind.input_keys, SECRETS_KEY))  # which of them are secret travels with them
    with secrecy.hidden(inputs):
        limit = _limit(kind.create_timeout, inputs, timeout, "create")
        subject = inputs.get("adopt_id") or kind.subject(secrecy.shown(inputs))
        try:
            client = process.api_client("creating", kind.name, None)  # the process's, whatever is declared
        except UserError as exc:  # ... and the sentence names what is declared
            doing = "adopting" if inputs.get("adopt_id") else exc.doing
            raise UserError(doing, exc.kind, subject, exc.cause, exc.todo) from None

        at = deadline.moment(inputs, None)  # a time: known before the object exists
        if at is not None and at <= process.api_now(client):
            raise UserError("creating", kind.name, subject, f"its deadline, {deadline.words(inputs)}, has passed",
                            "Move stop_after later, or remove the declaration")  # fmt: skip

        def settle(obj: Obj) -> Made:  # the wait for the target (or the deadline), the kind's keep, the state
            ready = _wait_target(kind, client, obj, limit, deadline.moment(inputs, obj.created_at), inputs)
            if ready.status != kind.target:  # stopped at its deadline: in the state, stopped
                return Made(ready.id, _outputs(kind, inputs, ready, stopped=True))
            ready = kind.keep(client, obj.id, inputs, ready)
            return Made(ready.id, _outputs(kind, inputs, ready))

        body = secrecy.redacted(kind.to_request(inputs).to_wire(), inputs)  # as the create journal holds it
        return transaction.create(kind, client, inputs, body, subject, settle)


def _limit(default: float, inputs: Props, custom: float | None, operation: str) -> tuple[float, str]:
    """How long a wait lasts and the setting that says so: Pulumi's ``customTimeouts`` (which reach only the
    plugin face), else the declared provider option (``create_timeout`` in ``inputs``), else the kind's
    default."""
    if custom:
        return float(custom), f"customTimeouts.{operation}"
    return float(inputs.get(f"{operation}_timeout") or default), f"{operation}_timeout"


def _wait_target(
    kind: Kind[Obj, Req],
    client: TogetherRL,
    first: Obj,
    limit: tuple[float, str],
    at: datetime | None,
    inputs: Props,
) -> Obj:
    """Wait for the kind's target status, from ``first`` (the create's answer, or the adopted object as read),
    for the setting's time or until the deadline ``at`` (on the API's clock), whichever comes first. Reached at
    the deadline: the object is stopped, and returned as the stop left it."""
    timeout, setting = limit
    left = None if at is None else (at - process.api_now(client)).total_seconds()
    if left is not None and left < timeout:
        timeout, setting = max(left, 0.0), deadline.words(inputs)
    try:
        ready = wait(
            client,
            kind,
            first.id,
            first=first,
            done=lambda obj: obj is not None and obj.status == kind.target,
            failed=lambda obj: obj is None or obj.status in kind.failed,
            timeout=timeout,
            not_found_grace=NOT_FOUND_GRACE,  # a 404 just after the POST can be read-after-write lag
            limit=setting,
        )
    except WaitTimeout:
        if setting != deadline.words(inputs):
            raise
        assert at is not None
        log(f"{kind.name} {first.id}: not {kind.target.short} by its deadline, {deadline.words(inputs)} "
            f"({iso(at)}): stopping it")  # fmt: skip
        return _stop_at_deadline(kind, client, first.id, inputs, at) or first
    assert ready is not None  # done() holds only for an object
    return ready


# ------------------------------------------------------------------------------------------------ read


def read(kind: Kind[Obj, Req], ident: str, props: Props) -> Found | None:
    """The object as it is now (None: gone, so the next ``up`` recreates it); see the module docstring."""
    with secrecy.hidden(props):
        return _read(kind, ident, props)


def _read(kind: Kind[Obj, Req], ident: str, props: Props) -> Found | None:
    client = process.api_client("reading", kind.name, ident)
    try:
        # One list answers every read of a refresh; a GET only for what it does not show.
        live = process.listed(client, kind).get(ident) or _get_young(kind, client, ident, props)
    # The client refuses the id itself (it would change the request path): the user's, from import or get.
    except errors.InvalidArgument as exc:
        raise UserError("reading", kind.name, ident, "this is not an id an object can have",
                        _check_the_id(kind)) from exc  # fmt: skip
    except Exception as exc:
        raise UserError("reading", kind.name, ident, *explain(exc)) from exc
    if props.get(kind.required) is None and (live is None or live.status in kind.collection.ended):
        # `pulumi import` or `.get()`: nothing there is an error, never an entry without outputs in the state.
        state = (
            "the API answers 404 (not found)" if live is None else f"it is {live.status.short}: it has ended"
        )
        raise UserError("reading", kind.name, ident, state, _check_the_id(kind))
    keys = kind.input_keys
    at = deadline.passed(props, process.api_now(client))
    if at is not None and (live is None or live.status in kind.collection.ended):
        state = "not found" if live is None else live.status.short
        log(f"{kind.name} {ident} is {state} and its deadline, {deadline.words(props)} ({iso(at)}), has passed: "
            "keeping it in the state, stopped (the next `pulumi up` does not re-create it; move stop_after to "
            "start a new one)")  # fmt: skip
        stopped = {**props, deadline.STOP_REASON: deadline.REASON}
        if live is not None:
            stopped = {**_outputs(kind, pick(props, keys), live, stopped=True)}
        return Found(ident, stopped, {k: props[k] for k in keys if k in props})
    if at is not None and live is not None:
        log(f"{kind.name} {ident} is {live.status.short} past its deadline, {deadline.words(props)} ({iso(at)}): "
            f"the next `pulumi up` stops it, or `{command('reap --stop')}`")  # fmt: skip
    if live is None and young(props):
        log(
            f"{kind.name} {ident}: the API answers 404 for it, but it was created "
            f"{format_elapsed(age_of(props) or 0)} ago: keeping it in the state (read-after-write lag); refresh "
            "again in a minute"
        )
        return Found(ident, dict(props), {k: props[k] for k in keys if k in props})
    if live is None or live.status in kind.collection.ended:
        state = "not found" if live is None else live.status.short + kind.gone_because(props, live)
        log(
            f"{kind.name} {ident} is {state}: dropping it from the state; the next `pulumi up` creates a new one"
        )
        return None
    if props.get(kind.required) is None:  # `.get()`: nothing declared, describe what exists
        inputs = kind.inputs_from_api(live)
        return Found(ident, kind.to_outputs(inputs, live), inputs)  # nothing declared: no deadline
    inputs = kind.read_inputs(pick(props, keys), live)
    try:
        live = kind.keep(client, ident, inputs, live)
    except Exception as exc:  # a refresh reports what is there: a keep that failed is said, not a failed read
        log(f"{kind.name} {ident}: {_keep_failed(kind, exc)}; the next refresh tries again")
    if OWNER_KEY not in props:
        # Outputs an earlier release wrote (an unchanged `up` keeps a state's outputs as they were): the inputs
        # check added since (the declaration, the estimated price, a session's resource spec) are missing here
        # but stored with the inputs. Rebuilt from these outputs, they would be dropped at every refresh (and
        # the price asked for again at every preview): the stored inputs stay as they are.
        return Found(ident, kind.steady(props, kind.to_outputs(inputs, live)), None)
    return Found(ident, kind.steady(props, _outputs(kind, inputs, live)), inputs)


def _check_the_id(kind: Kind[Obj, Req]) -> str:
    """What to do about an id that ``pulumi import`` or ``.get()`` (``get: id:`` in YAML) was given."""
    return (
        f"Check the id given to `pulumi import` or `.get()` (`get: id:` in YAML): it must be the id of an "
        f"existing {kind.name} that has not ended (GET {kind.path} lists them)"
    )


def _get_young(kind: Kind[Obj, Req], client: TogetherRL, ident: str, props: Props) -> Obj | None:
    """GET; a 404 for a young object is tried again over a few seconds before it is believed."""
    delays = list(READ_RETRY_DELAYS) if young(props) else []
    while True:
        found = kind.find(client, ident)
        if found is not None or not delays:
            return found
        time.sleep(delays.pop(0))


# ---------------------------------------------------------------------------------------------- update


def update(kind: Kind[Obj, Req], ident: str, olds: Props, news: Props) -> State:
    """The new state: the kind's PATCH of what changed in place, or (provider options only) no call at all."""
    with secrecy.hidden(news):
        return _update(kind, ident, olds, news)


def _update(kind: Kind[Obj, Req], ident: str, olds: Props, news: Props) -> State:
    immutable = changed_keys(olds, news, kind.replace_on_changes)
    if immutable:
        raise UserError("updating", kind.name, ident, f"{', '.join(immutable)} cannot change in place", f"Replace the {kind.name}")  # fmt: skip
    inputs = pick(news, kind.input_keys)
    created = olds.get("created_at")
    at = deadline.moment(news, created)
    stop = at is not None and at <= deadline.now() and not deadline.stopped_at(olds)
    stop = stop and olds.get("status") not in _ended(kind)  # the diff's rule: a deadline reached running
    body = kind.patch(olds, news)
    kept = changed_keys(olds, news, kind.kept_by)
    carried = {k: v for k, v in olds.items() if k in kind.output_keys and k not in deadline.OUTPUTS}
    if not body and not kept and not stop:
        return {**inputs, **carried, **deadline.outputs(news, created, deadline.stopped_at(olds))}
    client = process.api_client("updating", kind.name, ident)
    if stop:
        assert at is not None
        last = _stop_at_deadline(kind, client, ident, inputs, at)
        if last is None:  # 404: what the state knew of it, stopped
            return {**inputs, **carried, **deadline.outputs(news, created, stopped=True)}
        return _outputs(kind, inputs, last, stopped=last.status in kind.collection.ended)
    try:
        updated = kind.collection.patch(client, ident, body) if body else kind.collection.get(client, ident)
    except Exception as exc:
        raise UserError("updating", kind.name, ident, *explain(exc)) from exc
    if kept:
        try:
            updated = kind.keep(client, ident, inputs, updated)
        except Exception as exc:
            raise UserError("updating", kind.name, ident, _keep_failed(kind, exc), explain(exc)[1]) from exc
    return _outputs(kind, inputs, updated)


def _keep_failed(kind: Kind[Obj, Req], exc: Exception) -> str:
    return f"keeping it as {' and '.join(kind.kept_by)} declares failed ({explain(exc)[0]})"


# ---------------------------------------------------------------------------------------------- delete


def delete(kind: Kind[Obj, Req], ident: str, props: Props, *, timeout: float | None = None) -> None:
    """Stop and wait until the object holds nothing; 404 or already ended = done; see the module docstring.
    ``timeout``: Pulumi's ``customTimeouts.delete`` where a face receives it, over ``delete_timeout``."""
    with secrecy.hidden(props):
        _delete(kind, ident, props, timeout)


def _delete(kind: Kind[Obj, Req], ident: str, props: Props, timeout: float | None) -> None:
    force = kind.force(props)
    client = process.api_client("deleting", kind.name, ident)
    finish = kind.after_delete(client, ident, force)
    limit = _limit(kind.delete_timeout, props, timeout, "delete")
    refused = _stop_and_wait(kind, client, ident, props, limit, "deleting", force)
    if refused is not None:
        kind.refused(client, ident, refused, force)  # raises where the kind knows why
        raise UserError("deleting", kind.name, ident, *explain(refused, "deleting")) from refused
    finish()


def _stop_at_deadline(
    kind: Kind[Obj, Req], client: TogetherRL, ident: str, inputs: Props, at: datetime
) -> Obj | None:
    """Stop an object whose deadline ``at`` has come (an update of one the state shows running past it, a create
    whose wait reached it), and wait until it holds nothing; the object as the stop left it (None: 404). A stop
    the API refuses (a model resource with sessions attached that are not forced) is a warning: the object is
    returned as it is, still due, and the next ``up`` (or ``reap``) stops it once what holds it has stopped."""
    force = kind.force(inputs)
    limit = _limit(kind.delete_timeout, inputs, None, "delete")
    log(f"{kind.name} {ident}: its deadline, {deadline.words(inputs)} ({iso(at)}), has passed: stopping it")
    last: list[Obj | None] = []
    refused = _stop_and_wait(kind, client, ident, inputs, limit, "stopping", force, seen=last.append)
    if refused is not None:
        cause, todo = explain(refused, "stopping")
        try:
            kind.refused(client, ident, refused, force)
        except (
            UserError
        ) as exc:  # the kind knows why (sessions attached): its cause, and what a deadline needs
            cause, todo = exc.cause, DEADLINE_HELD_TODO
        log(f"warning: stopping {kind.name} ({ident}) at its deadline: {cause.rstrip('.')}. {todo}. It is still "
            "running: the next `pulumi up` (or `reap --stop`) stops it once nothing holds it")  # fmt: skip
        return kind.find(client, ident)
    log(f"{kind.name} {ident}: stopped at its deadline ({deadline.words(inputs)})")
    return last[-1] if last else None


def _stop_and_wait(
    kind: Kind[Obj, Req],
    client: TogetherRL,
    ident: str,
    props: Props,
    limit: tuple[float, str],
    doing: str,
    force: bool,
    seen: Callable[[Obj | None], None] = lambda obj: None,
) -> ApiError | None:
    """Stop (through an outage; a refusal judged by the object's state) and wait until the object holds nothing,
    sending the stop again if it did not take: a delete's, and a deadline's. ``seen`` gets the last observation.
    Returns the API's refusal when it refused a stop of an active object (the caller says why); raises
    :class:`UserError` for anything else that failed."""
    name, collection = kind.name, kind.collection
    timeout, setting = limit
    try:
        outcome = stopping.stop(
            collection,
            client,
            ident,
            window=timeout,
            limit=f"{setting} {format_elapsed(timeout)}",
            force=force,
            young=young(props),
        )
    except Exception as exc:
        cause, todo = explain(exc, doing)
        if errors.is_transient(exc):  # an outage that outlasted the window the setting gives
            cause, todo = (
                f"{cause}, through all of {setting} ({format_elapsed(timeout)})",
                (f"Run the command again once the API answers, or raise {setting}"),
            )
        raise UserError(doing, name, ident, cause, todo) from exc
    if outcome.outcome == stopping.NOT_FOUND_YET:
        # It may exist and bill; calling it gone would let delete-before-replace make the replacement beside it.
        raise UserError(doing, name, ident, f"stopping it answered 404 (not found) for several seconds, but "
                        f"it was created {format_elapsed(age_of(props) or 0)} ago, so it may still exist "
                        "(read-after-write lag)", "Run the command again in a minute")  # fmt: skip
    if outcome.outcome == stopping.ENDED:
        seen(outcome.last)
        if outcome.error is None:
            log(f"{name} {ident}: already gone")
        else:
            state = "not found" if outcome.last is None else outcome.last.status.short
            log(f"{name} {ident}: the API refused the stop (HTTP {outcome.error.status}) because it is already {state}: done")  # fmt: skip
        return None
    if outcome.outcome == stopping.REFUSED:
        assert outcome.error is not None
        return outcome.error
    if outcome.error is not None:
        assert outcome.last is not None  # refused for an object already stopping: as read after the refusal
        log(f"{name} {ident}: the API refused the stop (HTTP {outcome.error.status}): it is {outcome.last.status.short} already")  # fmt: skip
    try:
        ended = wait(
            client,
            kind,
            ident,
            first=outcome.last if outcome.last is not None and outcome.last.id == ident else NOTHING,
            wrap=stopping.restopping(collection, client, ident, force=force),
            done=lambda obj: obj is None or obj.status in collection.ended,
            failed=lambda obj: False,
            timeout=timeout,
            limit=setting,
        )
    except Exception as exc:
        raise UserError(
            doing, name, ident, explain(exc, doing)[0], kind.still_held.format(setting=setting)
        ) from exc
    seen(ended)
    return None


# ----------------------------------------------------------------------------------------------- parts


def wait(
    client: TogetherRL,
    kind: Kind[Obj, Req],
    ident: str,
    *,
    done: Callable[[Obj | None], bool],
    failed: Callable[[Obj | None], bool],
    timeout: float,
    limit: str,
    not_found_grace: float = 0.0,
    first: Obj | Nothing = NOTHING,
    wrap: Callable[[Callable[[], Obj | None]], Callable[[], Obj | None]] | None = None,
) -> Obj | None:
    """:func:`..waiting.wait_for` on the process's watcher of the kind (:mod:`.watch`): one list per tick serves
    every wait of the kind. ``first`` is an observation in hand (a create's own answer): the first check uses
    it, with no request. ``wrap`` decorates the fetch (a delete's re-stop). 429, 5xx and connection failures of
    a tick are no news (the wait lasts its whole timeout through an API outage); ``limit`` names the setting
    of ``timeout`` for the lines that say until when it keeps trying."""
    with watch.watcher(client, kind).watch(ident, first).until(time.monotonic() + float(timeout)) as sub:
        return wait_for(
            wrap(sub.fetch) if wrap else sub.fetch,
            done=done,
            failed=failed,
            describe=functools.partial(kind.describe, ident),
            timeout=float(timeout),
            not_found_grace=not_found_grace,
            transient=lambda exc: errors.is_transient(exc) or isinstance(exc, NoAnswerYet),
            sleep=lambda seconds: None,  # the watcher paces: fetch blocks until its next tick
            limit=limit,
        )


def _outputs(kind: Kind[Obj, Req], inputs: Props, obj: Obj, *, stopped: bool = False) -> State:
    """The kind's state of ``obj``, with its deadline (:data:`.deadline.OUTPUTS`; ``stopped``: stopped at it)."""
    return {**kind.to_outputs(inputs, obj), **deadline.outputs(inputs, obj.created_at, stopped)}


def age_of(props: Props) -> float | None:
    """Seconds since the object in the state was created (its ``created_at`` output), None if unknown."""
    created = props.get("created_at")
    if not isinstance(created, str) or not created:
        return None
    try:
        moment = datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return None
    moment = moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)
    return (datetime.now(timezone.utc) - moment).total_seconds()


def young(props: Props) -> bool:
    """Whether a 404 for this object may still be the API's read-after-write lag (made under a minute ago)."""
    age = age_of(props)
    return age is not None and age < NOT_FOUND_GRACE
