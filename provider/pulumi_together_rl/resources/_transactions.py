"""The two transactions every create and delete of both resources goes through, once each.

:func:`create_transaction`: journal the intent, POST (or take over what an interrupted create of the same
request made), record the id, wait, write the outputs; on any failure after the POST stop the object and raise
naming it. :func:`stop_transaction`: stop through an outage, judge a refused stop by the object's state, wait
until it holds nothing. A :class:`Kind` (one per resource module) is what they need to know of a kind.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from pulumi.dynamic import CreateResult

from .. import journal
from ..client import errors
from ..waiting import NOTHING
from ._errors import ProviderError, explain, log
from ._lifecycle import (
    _aware,
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
    post: Callable[[Any, Any], Any]
    """``(client, request) -> object``: the create, with the client's reconciliation."""
    get: Callable[[Any, str], Any]
    stop: Callable[[Any, str], Any]
    find: Callable[[Any, Any, frozenset[str]], Any]
    """``(client, request, existing_ids) -> object | None``: the client's reconciliation lookup."""
    active: Callable[[Any, Any], Any]
    """``(client, request) -> iterable``: the active objects a create of ``request`` could have made."""
    untouched: Callable[[Any], bool]
    """Whether an object is still active, not even stopping (a stop has not taken)."""


JOURNAL_SKEW = timedelta(seconds=60)
"""How much earlier than an interrupted create's own clock an object it made may say it was created
(clock skew between this machine and the API)."""


def create_transaction(
    kind: Kind,
    client: Any,
    request: Any,
    ident: str | None,
    *,
    wait_until: Callable[[Any], Any],
    to_outputs: Callable[[Any], dict[str, Any]],
) -> CreateResult:
    """One create, whatever happens: journal the intent, POST (or take over what an interrupted create of the
    same request made), record the id, wait, write the outputs; on any failure after the POST stop the object
    and raise naming it. The journal entry goes when the engine gets the answer, except where an object may
    be left (an unanswered create, a stop that failed): then the next create of the same request finds it."""
    entry = journal.begin(kind.name, client.base_url, request.to_wire())
    keep = False
    try:
        created = _take_over(kind, client, request, entry)
        posted = created is None
        if posted:
            try:
                created = kind.post(client, request)
            except Exception as exc:
                keep = bool(getattr(exc, "maybe_created", False))
                cause, todo = explain(exc, "creating")
                if keep:
                    todo = (
                        "Run `pulumi up` again on this machine: the create journal takes it over if it shows up, "
                        "and makes a new one only if it does not; elsewhere, " + todo[0].lower() + todo[1:]
                    )
                raise ProviderError("creating", kind.name, ident, cause, todo) from exc
        try:
            # Everything after the POST is inside the try: nothing may leave the object running and unrecorded.
            if posted:
                entry.record(created.id)
                log(f"{kind.name} {created.id}: created ({created.status.short}); waiting for {kind.target}")
            outputs = to_outputs(wait_until(created))  # the answer in hand is the first observation
        except BaseException as exc:
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
                keep = not stopped  # a stop that failed leaves it for the next create to take over
        return CreateResult(created.id, outputs)
    finally:
        if not keep:
            entry.remove()


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
            lambda: retry_404(stop, props=props), window=timeout, what=f"{kind.name} {ident}: stopping"
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
        )
    except Exception as exc:
        raise ProviderError("deleting", kind.name, ident, explain(exc, "deleting")[0], still_held) from exc


def _take_over(kind: Kind, client: Any, request: Any, entry: journal.Entry) -> Any:
    """The active object an interrupted create of the same request made, if any (claimed), else None."""
    for old in journal.interrupted(kind.name, client.base_url, request.to_wire()):
        if not journal.take(old):
            continue  # another create of this process took it
        when = old.started.strftime("%Y-%m-%d %H:%M:%S UTC")
        try:
            found = _interrupted_object(kind, client, request, old)
        except Exception as exc:
            # Could not look: creating now might make a second one. Leave the entry for the next run and stop.
            journal.give_back(old)
            cause, _ = explain(exc)
            raise ProviderError(
                "creating",
                kind.name,
                old.id,
                f"an interrupted `pulumi up` ({when}) may have made this {kind.name}, and looking for it failed "
                f"({cause})",
                "Run `pulumi up` again once the API answers: it takes the object over if it exists",
            ) from exc
        if found is not None and not kind.gone(found):
            entry.record(found.id)
            old.remove()
            how = "created it" if old.id else "asked for it and never got the answer"
            log(
                f"{kind.name} {found.id}: taking it over: an interrupted `pulumi up` {how} at {when} and no "
                f"state recorded it ({found.status.short}); waiting for {kind.target}"
            )
            return found
        if old.id:
            state = "not found" if found is None else found.status.short
            log(f"{kind.name} {old.id}: an interrupted create made it at {when}; it is {state} now")
        old.remove()
    return None


def _interrupted_object(kind: Kind, client: Any, request: Any, old: journal.Entry) -> Any:
    """What an interrupted create made: by id when it got that far, else by matching what was made since."""
    if old.id:
        return get_or_none(lambda i: kind.get(client, i), old.id)
    # No id: killed between the POST and its answer. Objects made before it began are not candidates.
    cutoff = old.started - JOURNAL_SKEW
    existing = frozenset(o.id for o in kind.active(client, request) if _aware(o.created_at) < cutoff)
    return kind.find(client, request, existing)
