"""The two transactions every create and delete of both resources goes through, once each.

:func:`create_transaction`: journal the intent, take over what an interrupted create of the same declaration
made (by id, or by a strict unique match) or POST, record the id, wait, write the outputs; on any failure after
the POST stop the object and raise naming it. :func:`stop_transaction`: stop through an outage, judge a refused
stop by the object's state, wait until it holds nothing. A :class:`Kind` (one per resource module) is what they
need to know of a kind.

**The ownership rule** (``journal``): an existing object is taken over only with proof that this declaration
made it: an id the journal recorded from this declaration's own POST, or a match that is unique under strict
conditions (absent from that create's snapshot, made inside its POST's window, equal to the request with the
server's defaults, claimed by no other entry or create in flight). Ambiguous: nothing is taken, nothing is
POSTed, and the error says what was found. A failed create stops only the object its own POST (or take-over)
produced, and never once the engine is gone (:mod:`..lifeline`): then its entry keeps the id for the next run.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from pulumi.dynamic import CreateResult

from .. import journal, lifeline
from ..client import errors
from ..client.reconcile import AmbiguousCreate, Attribution
from ..waiting import NOTHING, format_elapsed
from ._errors import ProviderError, explain, log
from ._lifecycle import (
    abandon,
    get_or_none,
    look_after_refused_stop,
    not_found_on_stop,
    persist,
    restopping,
    retry_404,
    wait,
)


@dataclasses.dataclass(frozen=True)
class Kind:
    """What the create transaction needs to know of one kind of object (one per resource module)."""

    name: str
    """``"model resource"``: in every message."""
    path: str
    """The collection's API path, for the by-hand advice."""
    target: str
    """The status a create waits for (``READY``)."""
    gone: Callable[[Any], bool]
    """Whether an object's state no longer holds anything (stopped, expired, failed)."""
    stopped_note: str
    """What a successful stop after a failed create means for billing."""
    post: Callable[[Any, Any, Any], Any]
    """``(client, request, record) -> object``: the create, with the client's reconciliation; ``record`` is the
    journal entry (:class:`~..client.reconcile.CreateRecord`)."""
    get: Callable[[Any, str], Any]
    stop: Callable[[Any, str], Any]
    find: Callable[[Any, Any, Attribution], Any]
    """``(client, request, attribution) -> object | None``: the client's strict lookup (may raise
    :class:`~..client.reconcile.AmbiguousCreate`)."""
    untouched: Callable[[Any], bool]
    """Whether an object is still active, not even stopping (a stop has not taken)."""
    price: Callable[[Any, Any], str | None] = lambda client, request: None
    """``(client, request) -> "11.00 USD/h"`` or None: what an object like it costs, for the ambiguity report."""


def create_transaction(
    kind: Kind,
    client: Any,
    request: Any,
    ident: str | None,
    *,
    owner: str | None,
    wait_until: Callable[[Any], Any],
    to_outputs: Callable[[Any], dict[str, Any]],
) -> CreateResult:
    """One create, whatever happens: journal the intent, take over what an interrupted create of the same
    declaration (``owner``) made or POST, record the id, wait, write the outputs; on any failure after the POST
    stop the object and raise naming it. The entry stays, as the record that its id is claimed (``done``), or
    for the next run where an object may be left (an unanswered create, a stop that failed, a gone engine)."""
    try:
        entry = journal.begin(kind.name, client.base_url, request.to_wire(), owner)
    except journal.Unwritable as exc:
        raise ProviderError("creating", kind.name, ident, exc.cause, exc.todo) from None
    try:
        created = _take_over(kind, client, request, entry, ident) or _post(
            kind, client, request, entry, ident
        )
        try:
            # Everything after the POST is inside the try: nothing may leave the object running and unrecorded.
            if entry.id != created.id:
                entry.record(created.id)
                log(f"{kind.name} {created.id}: created ({created.status.short}); waiting for {kind.target}")
            outputs = to_outputs(wait_until(created))  # the answer in hand is the first observation
        except BaseException as exc:
            if lifeline.gone():
                entry.leave(lifeline.GONE_NOTE)  # nobody will get an answer: the next run takes it over
                raise
            stopped: list[bool] = []
            try:
                abandon(
                    "creating",
                    kind.name,
                    created.id,
                    exc,
                    stop=lambda: kind.stop(client, created.id),
                    fetch=lambda: get_or_none(lambda i: kind.get(client, i), created.id),
                    gone=kind.gone,
                    path=kind.path,
                    stopped_note=kind.stopped_note,
                    untouched=kind.untouched,
                    on_stopped=lambda: stopped.append(True),
                )
            finally:
                if stopped:
                    entry.discard()
                else:  # left for the next create of this declaration, which may run in this process
                    client.unclaim(created.id)
        if lifeline.gone():
            entry.leave(lifeline.GONE_NOTE)
        else:
            entry.done()
        return CreateResult(created.id, outputs)
    finally:
        if entry.state == "intent":
            entry.discard()  # nothing was sent: nothing can be billing
        entry.release()  # whatever is left of it stays on disk for the next run


def _post(kind: Kind, client: Any, request: Any, entry: journal.Entry, ident: str | None) -> Any:
    """POST the create through the client's reconciliation, the entry recording its snapshot and sends."""
    try:
        return kind.post(client, request, entry)
    except Exception as exc:
        maybe = bool(getattr(exc, "maybe_created", False))
        if not maybe:
            entry.discard()  # refused, or nothing sent: nothing can be billing
        cause, todo = explain(exc, "creating")
        if maybe:
            todo = (
                "Run `pulumi up` again on this machine: the create journal takes it over if it shows up and "
                "can be told apart from others, and makes a new one only if nothing was made; elsewhere, "
                + todo[0].lower()
                + todo[1:]
            )
        raise ProviderError("creating", kind.name, ident, cause, todo) from exc


def _take_over(kind: Kind, client: Any, request: Any, entry: journal.Entry, ident: str | None) -> Any:
    """The active object an interrupted create of the same declaration made, if any (its entry is then
    recorded in ``entry``), else None. Raises when it cannot tell (the API failed, or several objects match)."""
    for old in journal.left_by_interrupted(entry):
        if not old.claim():
            continue  # a run still holds it (or another thread of this one took it first)
        when = old.started.strftime("%Y-%m-%d %H:%M:%S UTC")
        try:
            found = _interrupted_object(kind, client, request, old)
        except AmbiguousCreate as exc:
            old.release()
            raise ProviderError(
                "creating",
                kind.name,
                ident,
                f"an interrupted `pulumi up` of this declaration ({when}) asked for it and never got the answer, "
                f"and {exc}{_priced(kind, client, request)}",
                f"If one of them is this stack's, set adopt_id to its id and run `pulumi up`; if none is, run "
                f"`python -m pulumi_together_rl journal dismiss {old.path.stem}` and `pulumi up` to create a new "
                "one",
            ) from exc
        except Exception as exc:
            # Could not look: creating now might make a second one. Leave the entry for the next run and stop.
            old.release()
            cause, _ = explain(exc)
            raise ProviderError(
                "creating",
                kind.name,
                old.id or ident,
                f"an interrupted `pulumi up` ({when}) may have made this {kind.name}, and looking for it failed "
                f"({cause})",
                "Run `pulumi up` again once the API answers: it takes the object over if it exists",
            ) from exc
        if found is not None and not kind.gone(found):
            entry.record(found.id)  # the proof carries over to this create's entry before the old one goes
            old.discard()
            how = "created it" if old.id else "asked for it and never got the answer"
            log(
                f"{kind.name} {found.id}: taking it over: an interrupted `pulumi up` of this declaration {how} at "
                f"{when} and no state recorded it ({found.status.short}); waiting for {kind.target}"
            )
            if old.note == lifeline.GONE_NOTE:
                log(SIGKILL_ADVICE)
            return found
        if old.id:
            state = "not found" if found is None else found.status.short
            log(f"{kind.name} {old.id}: an interrupted create made it at {when}; it is {state} now")
            old.discard()  # proven gone (or another declaration's now): nothing of it is left billing
        elif old.sends:
            # Nothing it could have made shows up (or the API's clock hides it): kept, so that the orphan
            # finder can still label what it made; its window is in the past, so it never matches again.
            old.leave(
                f"looked for at {journal.now_iso()} by a later create: nothing it could have made was found"
            )
        else:
            old.discard()  # killed before its POST: it sent nothing
    return None


def adopted(kind: Kind, client: Any, request: Any, owner: str | None, ident: str) -> None:
    """``adopt_id`` named this declaration's object: the user's choice resolves the interrupted creates of the
    declaration that got no answer (an ambiguity it was told to settle this way). Their windows must never hand a
    look-alike to a later create of the declaration once the adopted object is gone. Entries with an id stay:
    that id is proven this declaration's, and a later create takes it over if it is still there."""
    for old in journal.interrupted(kind.name, client.base_url, request.to_wire(), owner):
        if not old.id and old.claim():
            old.discard()
            log(
                f"{kind.name} {ident}: adopted; dropped the journal entry of the interrupted create of this "
                f"declaration at {old.started.strftime('%Y-%m-%d %H:%M:%S UTC')} (it got no answer)"
            )


SIGKILL_ADVICE = (
    "note: the `pulumi` command of that run was killed before it got the answer, so it may have left the stack "
    "locked and a pending create in its state: if `pulumi up` said the stack is locked, `pulumi cancel` clears "
    "the lock; once this update is done, `pulumi refresh --clear-pending-creates` clears the pending create"
)


def _interrupted_object(kind: Kind, client: Any, request: Any, old: journal.Entry) -> Any:
    """What an interrupted create made: by id when it got that far, else by a strict unique match inside that
    create's snapshot and POST window (None: it sent nothing, or nothing it made is active)."""
    if old.id:
        found = get_or_none(lambda i: kind.get(client, i), old.id)
        # Claimed for this create (a match is claimed by the lookup): two declarations never get one object.
        return found if found is None or client.claim(found.id) else None
    window = old.window()
    if old.snapshot is None or window is None:
        return None  # killed before its POST: nothing was sent
    # A list can lag a create: right after the interrupted POST, its object may not be listed yet while a
    # look-alike is. Look only once the list has had time to show it.
    lag = (max(old.sends) + timedelta(seconds=client.list_lag)) - datetime.now(timezone.utc)
    if lag.total_seconds() > 0:
        time.sleep(lag.total_seconds())
    attribution = Attribution(frozenset(old.snapshot), window, claimed=old.claimed, rivals=old.rivals)
    return kind.find(client, request, attribution)


def _priced(kind: Kind, client: Any, request: Any) -> str:
    try:
        price = kind.price(client, request)
    except Exception:
        return ""
    return f"; each costs about {price}" if price else ""


def stop_transaction(
    kind: Kind,
    client: Any,
    ident: str,
    props: dict[str, Any],
    *,
    stop: Callable[[], Any],
    timeout: float,
    describe: Callable[[Any], str],
    still_held: str,
    refused: Callable[[errors.ApiError], None] = lambda exc: None,
) -> None:
    """One delete, for both kinds: stop (through an outage; a 404 for a young object tried again), judge a
    refused stop by the object's state (``refused`` first raises where the kind knows better, e.g. attached
    sessions), then wait until the object holds nothing, sending the stop again if it did not take.
    ``still_held`` is what to do when that wait fails."""
    fetch = lambda: get_or_none(lambda i: kind.get(client, i), ident)  # noqa: E731
    answer: Any = NOTHING  # the stop's own answer: the wait's first observation
    try:
        answer = persist(
            lambda: retry_404(stop, props=props),
            window=timeout,
            what=f"{kind.name} {ident}: stopping",
            limit=f"delete_timeout {format_elapsed(timeout)}",
        )
    except errors.NotFound:
        not_found_on_stop(kind.name, ident, props)
        return
    except (errors.Conflict, errors.BadRequest) as exc:
        refused(exc)
        # Perhaps it is stopped (or stopping) already: judged by its state, never by the message.
        live = look_after_refused_stop("deleting", kind.name, ident, fetch, exc)
        if live is None or kind.gone(live):
            state = "not found" if live is None else live.status.short
            log(f"{kind.name} {ident}: the API refused the stop (HTTP {exc.status}) because it is already {state}: done")  # fmt: skip
            return
        if kind.untouched(live):
            raise ProviderError("deleting", kind.name, ident, *explain(exc, "deleting")) from exc
        log(
            f"{kind.name} {ident}: the API refused the stop (HTTP {exc.status}): it is {live.status.short} already"
        )
    except Exception as exc:
        raise ProviderError("deleting", kind.name, ident, *explain(exc, "deleting")) from exc
    try:
        wait(
            client,
            kind.name,
            ident,
            first=answer if getattr(answer, "id", None) == ident else NOTHING,
            wrap=lambda fetch: restopping(fetch, stop, kind.untouched, f"{kind.name} {ident}"),
            done=lambda obj: obj is None or kind.gone(obj),
            failed=lambda obj: False,
            describe=describe,
            timeout=timeout,
            limit="delete_timeout",
        )
    except Exception as exc:
        raise ProviderError("deleting", kind.name, ident, explain(exc, "deleting")[0], still_held) from exc
