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

* **create**: journal the intent, take over what an interrupted create of the same declaration made, or POST
  (through the client's reconciliation), record the id, wait for the target with progress on stderr, keep it
  as declared (``Kind.keep``), write the outputs; on any failure after the POST stop the object
  (:mod:`..stopping`) and raise naming it. ``adopt_id`` instead takes over a named object: it must be
  adoptable and match what is declared, and a failed adopt never stops it.
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
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, NoReturn

from .. import lifeline, stopping
from ..ownership import journal
from ..client import errors
from ..client.collections import Obj, Req
from ..client.models import ApiObject
from ..client.reconcile import AmbiguousCreate, Attribution
from ..messages import UserError, explain, format_elapsed, log
from ..waiting import NOTHING, NoAnswerYet, Nothing, wait_for
from . import process, secrecy, watch
from .inputs import Diff, changed_keys, diff_inputs, pick
from .keys import OWNER_KEY, SECRETS_KEY
from .kind import Kind, Props, State

if TYPE_CHECKING:
    from ..client.api import TogetherRL

NOT_FOUND_GRACE = 60.0
"""Seconds after a create during which a 404 for the new object means "not visible yet" (read-after-write lag
of the API), not "gone": the create wait keeps polling that long (or until ``create_timeout``)."""

STOP_PERSIST_WINDOW = 120.0
"""Seconds a stop after a failed create keeps trying through 429s, 5xx and connection failures (the failure
it cleans up after is often the same outage): long enough for a typical blip, bounded so a dead API still
ends the command with the id to stop by hand."""

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
    """Over the declared inputs only, from the kind's tables; no HTTP."""
    return diff_inputs(
        olds, news, replace_on_changes=kind.replace_on_changes, update_in_place=kind.update_in_place
    )


# ---------------------------------------------------------------------------------------------- create


def create(kind: Kind[Obj, Req], props: Props, *, timeout: float | None = None) -> Made:
    """Create (or adopt) what ``props`` (the checked inputs) declare; see the module docstring. ``timeout``:
    Pulumi's ``customTimeouts.create`` where a face receives it (the plugin), over ``create_timeout``."""
    with secrecy.hidden(props):
        return _create(kind, props, timeout)


def _create(kind: Kind[Obj, Req], props: Props, timeout: float | None) -> Made:
    inputs = pick(props, (*kind.input_keys, SECRETS_KEY))
    limit = _limit(kind.create_timeout, inputs, timeout, "create")
    if inputs.get("adopt_id"):
        return _adopt(kind, inputs, limit)
    subject = kind.subject(secrecy.shown(props))
    client = process.api_client("creating", kind.name, subject)
    request = kind.to_request(inputs)
    body = secrecy.redacted(request.to_wire(), props)  # what the journal may hold of it
    try:
        entry = journal.begin(kind.name, client.base_url, body, inputs.get(OWNER_KEY))
    except journal.Refused as exc:
        raise UserError(
            "creating", kind.name, subject, exc.cause, f"{exc.todo}; nothing was created"
        ) from None
    try:
        created = _take_over(kind, client, request, inputs, entry, subject) or _post(
            kind, client, request, entry, subject
        )
        try:
            # Everything after the POST is inside the try: nothing may leave the object running and unrecorded.
            if entry.id != created.id:
                _record(kind, entry, created.id)
                log(
                    f"{kind.name} {created.id}: created ({created.status.short}); waiting for {kind.target.short}"
                )
            ready = kind.keep(client, created.id, inputs, _wait_target(kind, client, created, limit))
            outputs = kind.to_outputs(inputs, ready)
        except BaseException as exc:
            if lifeline.gone():
                _leave_for_next_run(kind, client, entry, created.id)  # nobody will get an answer
                raise
            _abandon(kind, client, created.id, exc, entry)
        if lifeline.gone():
            _leave_for_next_run(kind, client, entry, created.id)
        else:
            _done(kind, entry, created.id)
        return Made(created.id, outputs)
    finally:
        if entry.state == "intent":
            entry.discard()  # nothing was sent: nothing can be billing
        entry.release()  # whatever is left of it stays on disk for the next run


def _record(kind: Kind[Obj, Req], entry: journal.Entry, ident: str) -> None:
    """Record the id the POST answered. An entry that cannot be written (a full disk) fails nothing: the id goes
    to the engine with the answer, which is the record that matters; the line says what is not protected."""
    try:
        entry.record(ident)
    except journal.Refused as exc:
        entry.id = ident  # this process knows it; only the file does not
        entry.unrecorded = True
        log(
            f"warning: {kind.name} {ident}: created, but the create journal could not record its id "
            f"({exc.cause}); the create goes on and the id reaches the stack's state with its answer. If this "
            f"`pulumi up` is interrupted before it ends, check it with GET {kind.path}/{ident} and stop it "
            f"(POST {kind.path}/{ident}/stop) if no stack holds it"
        )


def _done(kind: Kind[Obj, Req], entry: journal.Entry, ident: str) -> None:
    """The engine is getting the answer: the entry becomes the record that the id is claimed."""
    try:
        entry.done()
    except journal.Refused as exc:
        entry.release()
        log(f"warning: {kind.name} {ident}: created; the create journal could not mark it done ({exc.cause})")


def _leave_for_next_run(kind: Kind[Obj, Req], client: TogetherRL, entry: journal.Entry, ident: str) -> None:
    """The engine is gone before its answer: the entry keeps the id for the next run to take over. An id the
    journal could not record would reach nobody: the object is then stopped, as after a failed create."""
    try:
        if not entry.unrecorded:
            entry.leave(lifeline.GONE_NOTE)
            return
    except journal.Refused as exc:
        log(
            f"{kind.name} {ident}: the engine is gone and the create journal cannot keep the id ({exc.cause})"
        )
    sentence, stopped = _stop_after_failed_create(kind, client, ident)
    if stopped:
        entry.discard()
    else:
        entry.release()
    log(f"{kind.name} {ident}: no state and no journal entry will hold it: {sentence}")


def _post(
    kind: Kind[Obj, Req], client: TogetherRL, request: Req, entry: journal.Entry, subject: str | None
) -> Obj:
    """POST the create through the client's reconciliation, the entry recording its snapshot and sends."""
    try:
        return kind.collection.create(client, request, entry)
    except Exception as exc:
        maybe = bool(getattr(exc, "maybe_created", False))
        if not maybe:
            entry.discard()  # refused, or nothing sent: nothing can be billing
        cause, todo = explain(exc, "creating")
        if isinstance(getattr(exc, "lookup_error", None), AmbiguousCreate):
            todo = _none_proven(entry)  # another run would find the same look-alikes: only the user can tell
        elif maybe:
            todo = (
                "Run `pulumi up` again on this machine: the create journal takes it over if it shows up and "
                "can be told apart from others, and makes a new one only if nothing was made; elsewhere, "
                + todo[0].lower()
                + todo[1:]
            )
        raise UserError("creating", kind.name, subject, cause, todo) from exc


def _take_over(
    kind: Kind[Obj, Req],
    client: TogetherRL,
    request: Req,
    inputs: Props,
    entry: journal.Entry,
    subject: str | None,
) -> Obj | None:
    """The active object an interrupted create of the same declaration made, if any (its entry is then
    recorded in ``entry``), else None. Raises when it cannot tell (the API failed, several objects match, the
    entry names an object that is not what is declared, or an entry of an earlier release cannot say whose
    stack it was)."""
    _unattributed(kind, client, entry, subject)
    for old in journal.left_by_interrupted(entry):
        if not old.claim():
            continue  # a run still holds it (or another thread of this one took it first)
        when = old.started.strftime("%Y-%m-%d %H:%M:%S UTC")
        try:
            found = _interrupted_object(kind, client, request, inputs, old)
        except UserError:
            old.release()
            raise
        except AmbiguousCreate as exc:
            old.release()
            raise UserError(
                "creating",
                kind.name,
                subject,
                f"an interrupted `pulumi up` of this declaration ({when}) asked for it and never got the answer, "
                f"and {exc}{_priced(kind, client, request)}",
                _none_proven(old),
            ) from exc
        except Exception as exc:
            # Could not look: creating now might make a second one. Leave the entry for the next run and stop.
            old.release()
            cause, _ = explain(exc)
            raise UserError(
                "creating",
                kind.name,
                old.id or subject,
                f"an interrupted `pulumi up` ({when}) may have made this {kind.name}, and looking for it "
                f"failed ({cause})",
                "Run `pulumi up` again once the API answers: it takes the object over if it exists",
            ) from exc
        if found is not None and found.status not in kind.collection.ended:
            entry.record(found.id)  # the proof carries over to this create's entry before the old one goes
            old.discard()
            how = (
                "created it"
                if old.id
                else (
                    "asked for one and never got the answer; this one is taken by a match, not an answer: it is the one "
                    f"new {kind.name} that matches, made {_made_after(old, found)} after that POST was sent, "
                    f"{format_elapsed(max(0.0, (datetime.now(timezone.utc) - _aware(found.created_at)).total_seconds()))} ago,"
                )
            )
            log(
                f"{kind.name} {found.id}: taking it over: an interrupted `pulumi up` of this declaration {how} "
                f"at {when} and no state recorded it ({found.status.short}); waiting for {kind.target.short}. If "
                "that `pulumi up` ended before the answer (Ctrl-C twice, a kill), its state keeps a pending create "
                "of it: `pulumi refresh --clear-pending-creates --yes` clears that once this update is done"
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


def _made_after(old: journal.Entry, found: ApiObject) -> str:
    """How long after ``old``'s first send (its writer's clock) the API stamped ``found`` (its clock)."""
    if not old.sends:
        return "an unknown time"
    seconds = (_aware(found.created_at) - min(old.sends)).total_seconds() - (old.clock_offset or 0.0)
    return format_elapsed(max(0.0, seconds))


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


SIGKILL_ADVICE = (
    "note: the `pulumi` command of that run was killed before it got the answer, so it may have left the stack "
    "locked and a pending create in its state: if `pulumi up` said the stack is locked, `pulumi cancel` clears "
    "the lock; once this update is done, `pulumi refresh --clear-pending-creates` clears the pending create"
)


def _interrupted_object(
    kind: Kind[Obj, Req], client: TogetherRL, request: Req, inputs: Props, old: journal.Entry
) -> Obj | None:
    """What an interrupted create made: by id when it got that far, else by a strict unique match inside that
    create's snapshot and POST window (None: it sent nothing, or nothing it made is active)."""
    if old.id:
        found = get_or_none(kind, client, old.id)
        if found is not None and found.status not in kind.collection.ended:
            # The entry is the proof, and an entry is a file: an object that is not what the declaration asks
            # for was not made by its create, whatever the file says.
            mismatched = kind.differences(inputs, found)
            if mismatched:
                raise UserError(
                    "creating",
                    kind.name,
                    old.id,
                    f"the create journal entry {old.path} says an interrupted `pulumi up` of this declaration made "
                    f"it, but it is not what this declaration asks for ({'; '.join(mismatched)}), so it was not "
                    "taken and nothing was created",
                    f"If that entry is not yours, remove it (`python -m pulumi_together_rl journal prune "
                    f"{old.path.stem}`) and run `pulumi up` again",
                )
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
    attribution = Attribution(
        frozenset(old.snapshot),
        window,
        offset=old.clock_offset,
        claimed=old.claimed,
        rivals=old.rivals,
        claim=not old.refused,
    )
    found = kind.collection.find(client, request, attribution)
    if found is not None and old.refused:
        # The API answered that POST with its own failure: a look-alike is as likely a colleague's.
        raise AmbiguousCreate(kind.name, [found], False, refused=True)
    return found


def _unattributed(
    kind: Kind[Obj, Req], client: TogetherRL, entry: journal.Entry, subject: str | None
) -> None:
    """Entries an earlier release left for this owner and request without recording the stack's backend: what
    they made may be this stack's or a namesake's in another backend. Nothing is taken and nothing created while
    one may hold an active object; the user says whose it is."""
    for old in journal.unattributed(entry):
        if not old.sends and not old.id:
            if old.claim():
                old.discard()  # killed before its POST: it sent nothing
            continue
        when = old.started.strftime("%Y-%m-%d %H:%M:%S UTC")
        if old.id:
            found = get_or_none(kind, client, old.id)
            if found is None or found.status in kind.collection.ended:
                if old.claim():
                    old.discard()  # proven gone: nothing of it is left billing
                continue
            what, todo = f"made {old.id} ({found.status.short})", f"set adopt_id to {old.id}"
        else:
            what, todo = "asked for one and never got the answer", "set adopt_id to the one it made"
        raise UserError(
            "creating",
            kind.name,
            subject,
            f"an interrupted `pulumi up` of a declaration of this name ({when}), run by an earlier release that did "
            f"not record the stack's backend, {what}: it may be this stack's or that of a stack of the same names "
            "in another backend, so nothing was taken and nothing was created",
            f"If it is this stack's, {todo} and run `pulumi up`; if not, run `python -m pulumi_together_rl journal "
            f"dismiss {old.path.stem}` and `pulumi up` to create a new one",
        )


def _none_proven(entry: journal.Entry) -> str:
    """What to do when several objects match a create whose answer was lost: the user tells which is theirs."""
    return (
        "If one of them is this stack's, set adopt_id to its id and run `pulumi up`; if none is, run "
        f"`python -m pulumi_together_rl journal dismiss {entry.path.stem}` and `pulumi up` to create a new one"
    )


def _priced(kind: Kind[Obj, Req], client: TogetherRL, request: Req) -> str:
    try:
        price = kind.price(client, request)
    except Exception:  # a price is a courtesy: the report goes out without it
        return ""
    return f"; each costs about {price}" if price else ""


def _abandon(
    kind: Kind[Obj, Req], client: TogetherRL, ident: str, exc: BaseException, entry: journal.Entry
) -> NoReturn:
    """After a failed create: stop what was made, then raise the error naming the id (``KeyboardInterrupt`` and
    ``SystemExit`` are re-raised as they are, after the stop). A stop that failed leaves the entry, and the
    object unclaimed, for the next create of the declaration (which may run in this process)."""
    sentence, stopped = _stop_after_failed_create(kind, client, ident)
    if stopped:
        entry.discard()
    else:
        client.unclaim(ident)
    if not isinstance(exc, Exception):
        raise exc
    cause, todo = explain(exc, "creating")
    raise UserError("creating", kind.name, ident, cause, f"{sentence}. {todo}") from exc


def _stop_after_failed_create(kind: Kind[Obj, Req], client: TogetherRL, ident: str) -> tuple[str, bool]:
    """Stop the object a failed create made (a 404 tried again: it was just made); the sentence saying how that
    went, and whether it is stopped. An accepted stop is checked (:func:`..stopping.took`)."""
    name, path = kind.name, kind.path
    by_hand = f"check it with GET {path}/{ident} and stop it if it is there (POST {path}/{ident}/stop)"
    try:
        outcome = stopping.stop(
            kind.collection,
            client,
            ident,
            window=STOP_PERSIST_WINDOW,
            limit=f"a stop after a failed create tries for {format_elapsed(STOP_PERSIST_WINDOW)}",
            young=True,
            what=f"{name} {ident}: stopping it after the failed create",
        )
    except Exception as stop_exc:
        cause, _ = explain(stop_exc)
        log(f"{name} {ident}: create failed and stopping it failed: {cause}")
        return f"Stopping it failed too ({cause}); {by_hand}", False
    if outcome.outcome == stopping.NOT_FOUND_YET:
        tried = f"{outcome.tries} times over {format_elapsed(outcome.seconds)}"
        log(f"{name} {ident}: create failed; stopping it answered 404 (not found) {tried}")
        return (
            f"It may still exist: stopping it answered 404 (not found) {tried}, which can be the API's "
            f"read-after-write lag; {by_hand}"
        ), False
    if outcome.outcome == stopping.ENDED:
        state = outcome.last.status.short if outcome.last is not None else "gone"
        log(f"{name} {ident}: create failed; it is already {state}")
        return f"It is already {state}: {kind.stopped_note}", True
    if outcome.outcome == stopping.REFUSED:
        assert outcome.error is not None  # a refusal is what makes the outcome REFUSED
        cause, _ = explain(outcome.error)
        log(f"{name} {ident}: create failed and stopping it failed: {cause}")
        return f"Stopping it failed too ({cause}); {by_hand}", False
    if not stopping.took(kind.collection, client, ident):
        log(f"{name} {ident}: create failed; stopping it was accepted, but it is still running")
        return (
            f"Stopping it was accepted {1 + len(stopping.STOP_CHECK_DELAYS)} times but did not take: it may "
            f"still be running; {by_hand}"
        ), False
    log(f"{name} {ident}: create failed; stopped it")
    return f"It has been stopped: {kind.stopped_note}", True


def _adopt(kind: Kind[Obj, Req], inputs: State, limit: tuple[float, str]) -> Made:
    """Take over the object ``adopt_id`` names: it must be adoptable and match the declared inputs; its
    in-place inputs are PATCHed to the declared ones; then wait for the target. Never stopped on failure: it
    existed before this program."""
    ident = inputs["adopt_id"]
    name = kind.name
    client = process.api_client("adopting", name, ident)
    try:
        live = get_or_none(kind, client, ident)
        if live is None:
            raise UserError("adopting", name, ident, "it does not exist", f"Check adopt_id (GET {kind.path}), or remove it to create a new one")  # fmt: skip
        if live.status not in kind.adoptable:
            allowed = " or ".join(sorted(s.short for s in kind.adoptable))
            raise UserError("adopting", name, ident, f"it is {live.status.short}", f"Only a {name} that is "
                            f"{allowed} can be adopted: remove adopt_id to create a new one")  # fmt: skip
        mismatched = kind.differences(inputs, live)
        if mismatched:
            raise UserError("adopting", name, ident, f"its settings differ from the declared inputs: "
                            f"{'; '.join(mismatched)}", "Declare the inputs it was created with, or remove "
                            "adopt_id to create a new one")  # fmt: skip
        body = kind.patch(kind.inputs_from_api(live), inputs)
        if body:
            live = kind.collection.patch(client, ident, body)
        ready = kind.keep(client, ident, inputs, _wait_target(kind, client, live, limit))
    except UserError:
        raise
    except Exception as exc:
        raise UserError("adopting", name, ident, *explain(exc, "adopting")) from exc
    _settle_adopted(kind, client, inputs, ident)
    return Made(ident, kind.to_outputs(inputs, ready))


def _settle_adopted(kind: Kind[Obj, Req], client: TogetherRL, inputs: Props, ident: str) -> None:
    """``adopt_id`` named this declaration's object: the user's choice resolves the interrupted creates of the
    declaration that got no answer (an ambiguity it was told to settle this way). Their windows must never hand a
    look-alike to a later create of the declaration once the adopted object is gone. Entries with an id stay:
    that id is proven this declaration's, and a later create takes it over if it is still there."""
    body = secrecy.redacted(kind.to_request(inputs).to_wire(), inputs)
    for old in journal.interrupted(kind.name, client.base_url, body, inputs.get(OWNER_KEY)):
        if not old.id and old.claim():
            old.discard()
            log(
                f"{kind.name} {ident}: adopted; dropped the journal entry of the interrupted create of this "
                f"declaration at {old.started.strftime('%Y-%m-%d %H:%M:%S UTC')} (it got no answer)"
            )


def _limit(default: float, inputs: Props, custom: float | None, operation: str) -> tuple[float, str]:
    """How long a wait lasts and the setting that says so: Pulumi's ``customTimeouts`` (which reach only the
    plugin face), else the declared provider option (``create_timeout`` in ``inputs``), else the kind's
    default."""
    if custom:
        return float(custom), f"customTimeouts.{operation}"
    return float(inputs.get(f"{operation}_timeout") or default), f"{operation}_timeout"


def _wait_target(kind: Kind[Obj, Req], client: TogetherRL, first: Obj, limit: tuple[float, str]) -> Obj:
    """Wait for the kind's target status, from ``first`` (the create's answer, or the adopted object as read)."""
    ready = wait(
        client,
        kind,
        first.id,
        first=first,
        done=lambda obj: obj is not None and obj.status == kind.target,
        failed=lambda obj: obj is None or obj.status in kind.failed,
        timeout=limit[0],
        not_found_grace=NOT_FOUND_GRACE,  # a 404 just after the POST can be read-after-write lag
        limit=limit[1],
    )
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
        return Found(ident, kind.to_outputs(inputs, live), inputs)
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
    return Found(ident, kind.steady(props, kind.to_outputs(inputs, live)), inputs)


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
        found = get_or_none(kind, client, ident)
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
    body = kind.patch(olds, news)
    kept = changed_keys(olds, news, kind.kept_by)
    if not body and not kept:
        return {**inputs, **{k: v for k, v in olds.items() if k in kind.output_keys}}
    client = process.api_client("updating", kind.name, ident)
    try:
        updated = kind.collection.patch(client, ident, body) if body else kind.collection.get(client, ident)
    except Exception as exc:
        raise UserError("updating", kind.name, ident, *explain(exc)) from exc
    if kept:
        try:
            updated = kind.keep(client, ident, inputs, updated)
        except Exception as exc:
            raise UserError("updating", kind.name, ident, _keep_failed(kind, exc), explain(exc)[1]) from exc
    return kind.to_outputs(inputs, updated)


def _keep_failed(kind: Kind[Obj, Req], exc: Exception) -> str:
    return f"keeping it as {' and '.join(kind.kept_by)} declares failed ({explain(exc)[0]})"


# ---------------------------------------------------------------------------------------------- delete


def delete(kind: Kind[Obj, Req], ident: str, props: Props, *, timeout: float | None = None) -> None:
    """Stop and wait until the object holds nothing; 404 or already ended = done; see the module docstring.
    ``timeout``: Pulumi's ``customTimeouts.delete`` where a face receives it, over ``delete_timeout``."""
    with secrecy.hidden(props):
        _delete(kind, ident, props, timeout)


def _delete(kind: Kind[Obj, Req], ident: str, props: Props, timeout: float | None) -> None:
    name, collection = kind.name, kind.collection
    force = kind.force(props)
    client = process.api_client("deleting", name, ident)
    finish = kind.after_delete(client, ident, force)
    timeout, setting = _limit(kind.delete_timeout, props, timeout, "delete")
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
        cause, todo = explain(exc, "deleting")
        if errors.is_transient(exc):  # an outage that outlasted the window the setting gives
            cause, todo = (
                f"{cause}, through all of {setting} ({format_elapsed(timeout)})",
                (f"Run the command again once the API answers, or raise {setting}"),
            )
        raise UserError("deleting", name, ident, cause, todo) from exc
    if outcome.outcome == stopping.NOT_FOUND_YET:
        # It may exist and bill; calling it gone would let delete-before-replace make the replacement beside it.
        raise UserError("deleting", name, ident, f"stopping it answered 404 (not found) for several seconds, but "
                        f"it was created {format_elapsed(age_of(props) or 0)} ago, so it may still exist "
                        "(read-after-write lag)", "Run the command again in a minute")  # fmt: skip
    if outcome.outcome == stopping.ENDED:
        if outcome.error is None:
            log(f"{name} {ident}: already gone")
        else:
            state = "not found" if outcome.last is None else outcome.last.status.short
            log(f"{name} {ident}: the API refused the stop (HTTP {outcome.error.status}) because it is already {state}: done")  # fmt: skip
        return
    if outcome.outcome == stopping.REFUSED:
        assert outcome.error is not None
        kind.refused(client, ident, outcome.error, force)  # raises where the kind knows why
        raise UserError("deleting", name, ident, *explain(outcome.error, "deleting")) from outcome.error
    if outcome.error is not None:
        assert outcome.last is not None  # refused for an object already stopping: as read after the refusal
        log(f"{name} {ident}: the API refused the stop (HTTP {outcome.error.status}): it is {outcome.last.status.short} already")  # fmt: skip
    try:
        wait(
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
            "deleting", name, ident, explain(exc, "deleting")[0], kind.still_held.format(setting=setting)
        ) from exc
    finish()


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


def get_or_none(kind: Kind[Obj, Req], client: TogetherRL, ident: str) -> Obj | None:
    """GET, with 404 as ``None`` (not-found is a state)."""
    try:
        return kind.collection.get(client, ident)
    except errors.NotFound:
        return None


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
