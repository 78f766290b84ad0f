"""One create as a transaction that owns its create journal entry, from the intent to the answer.

The ownership rule is :mod:`pulumi_together_rl.ownership`'s. A create, here, is four steps over one entry:

1. **open**: the intent is written (:func:`.journal.begin`) before anything is sent: a journal that cannot be
   written (or trusted) refuses the create, and nothing is created.
2. **obtain**: the object an interrupted create of the same declaration made is taken over (by the id its entry
   recorded, held against the declaration; or by a strict unique match inside its POST's own window), or the
   POST is sent through the client's reconciliation, the entry recording its snapshot, its sends and the id.
   Ambiguous: nothing is taken, nothing is POSTed, and the error says what was found and who decides.
3. **settle**: the caller's wait (READY / RUNNING, and the kind's keep) runs with the object.
4. **close**: the entry is marked done (the engine gets the answer, and the entry stays the record that the id
   is claimed); after a failure the object is stopped and the error names it; once the engine is gone
   (:mod:`..lifeline`) nothing is stopped or marked done: the entry keeps the id for the next run.

The entry's states are :class:`.journal.State`. :func:`create` is the one call the lifecycle makes;
:func:`settle_adopted` resolves, after an ``adopt_id``, the interrupted creates of the declaration that it
settles.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Generic, NoReturn, TypeVar

from .. import lifeline, stopping
from ..client.collections import Obj, Req
from ..client.models import ApiObject
from ..client.reconcile import AmbiguousCreate, Attribution
from ..messages import UserError, explain, format_elapsed, log
from ..resources import secrecy
from ..resources.keys import OWNER_KEY
from . import journal, recovery

if TYPE_CHECKING:
    from ..client.api import TogetherRL
    from ..resources.kind import Kind, Props

T = TypeVar("T")

STOP_PERSIST_WINDOW = 120.0
"""Seconds a stop after a failed create keeps trying through 429s, 5xx and connection failures (the failure
it cleans up after is often the same outage): long enough for a typical blip, bounded so a dead API still
ends the command with the id to stop by hand."""


def create(
    kind: Kind[Obj, Req],
    client: TogetherRL,
    inputs: Props,
    props: Props,
    subject: str | None,
    settle: Callable[[Obj], T],
) -> T:
    """Create what ``inputs`` declare as one transaction (see the module docstring); ``settle(created)`` waits
    for it (and keeps it) and gives the answer (run inside the transaction: its failure stops the object). ``props`` are the checked inputs as the engine
    sent them (which of them are secret)."""
    return CreateTransaction(kind, client, inputs, props, subject).run(settle)


class CreateTransaction(Generic[Obj, Req]):
    """One create of one declaration, owning its journal entry (see the module docstring)."""

    def __init__(
        self, kind: Kind[Obj, Req], client: TogetherRL, inputs: Props, props: Props, subject: str | None
    ) -> None:
        self.kind = kind
        self.client = client
        self.inputs = inputs
        self.subject = subject
        self.request = kind.to_request(inputs)
        self.body: dict[str, Any] = secrecy.redacted(self.request.to_wire(), props)  # what the journal holds
        self.entry: journal.Entry

    def run(self, settle: Callable[[Obj], T]) -> T:
        try:
            self.entry = journal.begin(
                self.kind.name, self.client.base_url, self.body, self.inputs.get(OWNER_KEY)
            )
        except journal.Refused as exc:
            raise UserError(
                "creating", self.kind.name, self.subject, exc.cause, f"{exc.todo}; nothing was created"
            ) from None
        try:
            try:
                created = self._take_over() or self._post()
            except journal.LeaseLost:
                self._lost(None)
            try:
                # Everything after the POST is inside the try: nothing may leave the object running and unrecorded.
                if self.entry.id != created.id:
                    self._record(created.id)
                    log(
                        f"{self.kind.name} {created.id}: created ({created.status.short}); waiting for "
                        f"{self.kind.target.short}"
                    )
                ready = settle(created)
            except journal.LeaseLost:
                self._lost(created.id)
            except BaseException as exc:
                if lifeline.gone():
                    self._leave_for_next_run(created.id)  # nobody will get an answer
                    raise
                self._abandon(created.id, exc)
            if lifeline.gone():
                self._leave_for_next_run(created.id)
            else:
                self._done(created.id)
            return ready
        except journal.LeaseLost:
            self._lost(created.id)
        finally:
            if self.entry.state == journal.State.INTENT:
                self.entry.discard()  # nothing was sent: nothing can be billing
            self.entry.release()  # whatever is left of it stays in the journal for the next run

    def _lost(self, ident: str | None) -> NoReturn:
        """This create's lease was taken over while it could not renew it (paused, cut off from the store): the
        run that took it over owns the object now. Nothing is stopped, nothing marked done."""
        what = f"its object ({ident}) and " if ident else ""
        raise UserError(
            "creating",
            self.kind.name,
            ident or self.subject,
            f"this run lost its create journal lease (it could not renew it for {journal.lease_seconds():g} s: paused, "
            f"or cut off from {journal.where()}) and another run took the create over, so {what}the entry are that "
            "run's; nothing was stopped or marked done here",
            "Let the other run finish, then run `pulumi preview` to see the stack as it left it",
        )

    def _unconfirmed(self, ident: str, exc: BaseException, unreachable: journal.Unreachable) -> NoReturn:
        """After a failed create whose journal cannot be reached: whether another run has taken the create over
        cannot be known, so nothing is stopped (it may be that run's now) and nothing marked done; the entry in the
        journal keeps the id for the next run."""
        if not isinstance(exc, Exception):
            raise exc
        cause, _ = explain(exc, "creating")
        kept = (
            "the journal holds its POST but could not record its id either, so the next run finds it by a match"
            if self.entry.unrecorded
            else "the journal keeps its id"
        )
        raise UserError(
            "creating",
            self.kind.name,
            ident,
            f"{cause}; it was not stopped, because the create journal at {journal.where()} could not confirm that "
            f"this run still holds the create ({unreachable.reason}), and another run may have taken it over; {kept}",
            "Once that store can be reached, run `pulumi up` again: it takes the object over if it is still active "
            f"(or stop it yourself: POST {self.kind.path}/{ident}/stop)",
        ) from exc

    def _record(self, ident: str) -> None:
        """Record the id the POST answered. An entry that cannot be written (a full disk) fails nothing: the id goes
        to the engine with the answer, which is the record that matters; the line says what is not protected."""
        try:
            self.entry.record(ident)
        except journal.Refused as exc:
            self.entry.id = ident  # this process knows it; only the file does not
            self.entry.unrecorded = True
            log(
                f"warning: {self.kind.name} {ident}: created, but the create journal could not record its id "
                f"({exc.cause}); the create goes on and the id reaches the stack's state with its answer. If this "
                f"`pulumi up` is interrupted before it ends, check it with GET {self.kind.path}/{ident} and stop it "
                f"(POST {self.kind.path}/{ident}/stop) if no stack holds it"
            )

    def _done(self, ident: str) -> None:
        """The engine is getting the answer: the entry becomes the record that the id is claimed."""
        try:
            self.entry.done()
        except journal.LeaseLost:
            raise
        except journal.Refused as exc:
            self.entry.release()
            log(
                f"warning: {self.kind.name} {ident}: created; the create journal could not mark it done ({exc.cause})"
            )

    def _leave_for_next_run(self, ident: str) -> None:
        """The engine is gone before its answer: the entry keeps the id for the next run to take over. An id the
        journal could not record would reach nobody: the object is then stopped, as after a failed create."""
        try:
            if not self.entry.unrecorded:
                self.entry.leave(lifeline.GONE_NOTE)
                return
        except journal.Refused as exc:
            log(
                f"{self.kind.name} {ident}: the engine is gone and the create journal cannot keep the id ({exc.cause})"
            )
        sentence, stopped = self._stop_after_failed_create(ident)
        if stopped:
            self.entry.discard()
        else:
            self.entry.release()
        log(f"{self.kind.name} {ident}: no state and no journal entry will hold it: {sentence}")

    def _post(self) -> Obj:
        """POST the create through the client's reconciliation, the entry recording its snapshot and sends."""
        try:
            return self.kind.collection.create(self.client, self.request, self.entry)
        except Exception as exc:
            maybe = bool(getattr(exc, "maybe_created", False))
            if not maybe:
                self.entry.discard()  # refused, or nothing sent: nothing can be billing
            cause, todo = explain(exc, "creating")
            if isinstance(getattr(exc, "lookup_error", None), AmbiguousCreate):
                todo = _none_proven(
                    self.entry
                )  # another run would find the same look-alikes: only the user can tell
            elif maybe:
                todo = (
                    "Run `pulumi up` again on this machine: the create journal takes it over if it shows up and "
                    "can be told apart from others, and makes a new one only if nothing was made; elsewhere, "
                    + todo[0].lower()
                    + todo[1:]
                )
            raise UserError("creating", self.kind.name, self.subject, cause, todo) from exc

    def _take_over(self) -> Obj | None:
        """The active object an interrupted create of the same declaration made, if any (its entry is then
        recorded in ``entry``), else None. Raises when it cannot tell (the API failed, several objects match, the
        self.entry names an object that is not what is declared, or an entry of an earlier release cannot say whose
        stack it was)."""
        self._unattributed()
        self._await_leases()
        for old in journal.left_by_interrupted(self.entry):
            if not old.claim():
                continue  # a run still holds it (or another thread of this one took it first)
            when = old.started.strftime("%Y-%m-%d %H:%M:%S UTC")
            try:
                found = self._interrupted_object(old)
            except UserError:
                old.release()
                raise
            except AmbiguousCreate as exc:
                old.release()
                raise UserError(
                    "creating",
                    self.kind.name,
                    self.subject,
                    f"an interrupted `pulumi up` of this declaration ({when}) asked for it and never got the answer, "
                    f"and {exc}{self._priced()}",
                    _none_proven(old),
                ) from exc
            except Exception as exc:
                # Could not look: creating now might make a second one. Leave the entry for the next run and stop.
                old.release()
                cause, _ = explain(exc)
                raise UserError(
                    "creating",
                    self.kind.name,
                    old.id or self.subject,
                    f"an interrupted `pulumi up` ({when}) may have made this {self.kind.name}, and looking for it "
                    f"failed ({cause})",
                    "Run `pulumi up` again once the API answers: it takes the object over if it exists",
                ) from exc
            if found is not None and found.status not in self.kind.collection.ended:
                try:
                    # The proof carries over to this create's entry before the old one goes.
                    self.entry.record(found.id, taken_from=old)
                except journal.Taken as exc:
                    old.release()
                    self.client.unclaim(found.id)
                    raise UserError(
                        "creating",
                        self.kind.name,
                        found.id,
                        f"it matched what an interrupted `pulumi up` of this declaration ({when}) asked for, but "
                        f"{exc.claim.get('owner') or 'another create'} recorded it first, so it was not taken and "
                        "nothing was created",
                        "Run `pulumi up` again: it looks again, and creates a new one only if nothing of this "
                        "declaration's is left",
                    ) from None
                old.discard()
                how = (
                    "created it"
                    if old.id
                    else (
                        "asked for one and never got the answer; this one is taken by a match, not an answer: it is the one "
                        f"new {self.kind.name} that matches, made {_made_after(old, found)} after that POST was sent, "
                        f"{format_elapsed(max(0.0, (datetime.now(timezone.utc) - _aware(found.created_at)).total_seconds()))} ago,"
                    )
                )
                log(
                    f"{self.kind.name} {found.id}: taking it over: an interrupted `pulumi up` of this declaration {how} "
                    f"at {when} and no state recorded it ({found.status.short}); waiting for {self.kind.target.short}. "
                    + recovery.after_take_over(self.entry.owner)
                )
                if old.note == lifeline.GONE_NOTE:
                    log(recovery.after_killed_engine(self.entry.owner, found.id))
                return found
            if old.id:
                state = "not found" if found is None else found.status.short
                log(f"{self.kind.name} {old.id}: an interrupted create made it at {when}; it is {state} now")
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

    def _await_leases(self) -> None:
        """An interrupted create of this declaration whose lease is still live (a runner killed a moment ago, in
        a shared journal) is waited for until its lease runs out: it is taken over then, never while live. One that
        is renewed meanwhile is a run at work: nothing is created beside it."""
        live = journal.outlast(
            lambda: journal.live_leases(self.entry),
            lambda wait, live: log(
                f"{self.kind.name}: an earlier create of this declaration holds a live create journal lease "
                f"({live[0].describe()}); waiting up to {format_elapsed(wait)} for it to end or run out"
            ),
        )
        if live:
            raise UserError(
                "creating",
                self.kind.name,
                live[0].id or self.subject,
                f"another run is creating this declaration now ({live[0].describe()}), and its create journal lease "
                "is still being renewed, so nothing was taken and nothing was created",
                "Let that run finish; if it is gone, its lease runs out within "
                f"{format_elapsed(journal.lease_seconds())}: run `pulumi up` again then",
            )

    def _interrupted_object(self, old: journal.Entry) -> Obj | None:
        """What an interrupted create made: by id when it got that far, else by a strict unique match inside that
        create's snapshot and POST window (None: it sent nothing, or nothing it made is active)."""
        if old.id:
            found = self.kind.find(self.client, old.id)
            if found is not None and found.status not in self.kind.collection.ended:
                # The entry is the proof, and an entry is a file: an object that is not what the declaration asks
                # for was not made by its create, whatever the file says.
                mismatched = self.kind.differences(self.inputs, found)
                if mismatched:
                    raise UserError(
                        "creating",
                        self.kind.name,
                        old.id,
                        f"the create journal entry {old.where} says an interrupted `pulumi up` of this declaration made "
                        f"it, but it is not what this declaration asks for ({'; '.join(mismatched)}), so it was not "
                        "taken and nothing was created",
                        f"If that entry is not yours, remove it (`python -m pulumi_together_rl journal prune "
                        f"{old.name}`) and run `pulumi up` again",
                    )
            # Claimed for this create (a match is claimed by the lookup): two declarations never get one object.
            return found if found is None or self.client.claim(found.id) else None
        window = old.window()
        if old.snapshot is None or window is None:
            return None  # killed before its POST: nothing was sent
        # A list can lag a create: right after the interrupted POST, its object may not be listed yet while a
        # look-alike is. Look only once the list has had time to show it.
        lag = (max(old.sends) + timedelta(seconds=self.client.list_lag)) - datetime.now(timezone.utc)
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
        found = self.kind.collection.find(self.client, self.request, attribution)
        if found is not None and old.refused:
            # The API answered that POST with its own failure: a look-alike is as likely a colleague's.
            raise AmbiguousCreate(self.kind.name, [found], False, refused=True)
        return found

    def _unattributed(self) -> None:
        """Entries an earlier release left for this owner and request without recording the stack's backend: what
        they made may be this stack's or a namesake's in another backend. Nothing is taken and nothing created while
        one may hold an active object; the user says whose it is."""
        for old in journal.unattributed(self.entry):
            if not old.sends and not old.id:
                if old.claim():
                    old.discard()  # killed before its POST: it sent nothing
                continue
            when = old.started.strftime("%Y-%m-%d %H:%M:%S UTC")
            if old.id:
                found = self.kind.find(self.client, old.id)
                if found is None or found.status in self.kind.collection.ended:
                    if old.claim():
                        old.discard()  # proven gone: nothing of it is left billing
                    continue
                what, todo = f"made {old.id} ({found.status.short})", f"set adopt_id to {old.id}"
            else:
                what, todo = "asked for one and never got the answer", "set adopt_id to the one it made"
            raise UserError(
                "creating",
                self.kind.name,
                self.subject,
                f"an interrupted `pulumi up` of a declaration of this name ({when}), run by an earlier release that did "
                f"not record the stack's backend, {what}: it may be this stack's or that of a stack of the same names "
                "in another backend, so nothing was taken and nothing was created",
                f"If it is this stack's, {todo} and run `pulumi up`; if not, run `python -m pulumi_together_rl journal "
                f"dismiss {old.name}` and `pulumi up` to create a new one",
            )

    def _priced(self) -> str:
        try:
            price = self.kind.price(self.client, self.request)
        except Exception:  # a price is a courtesy: the report goes out without it
            return ""
        return f"; each costs about {price}" if price else ""

    def _abandon(self, ident: str, exc: BaseException) -> NoReturn:
        """After a failed create: stop what was made, then raise the error naming the id (``KeyboardInterrupt`` and
        ``SystemExit`` are re-raised as they are, after the stop). A stop that failed leaves the entry, and the
        object unclaimed, for the next create of the declaration (which may run in this process). A create that
        lost its lease stops nothing: the run that took it over owns the object; nor does one that cannot reach its
        journal to tell."""
        try:
            held = self.entry.still_held()
        except journal.Unreachable as unreachable:
            self._unconfirmed(ident, exc, unreachable)
        if not held:
            self._lost(ident)
        sentence, stopped = self._stop_after_failed_create(ident)
        if stopped:
            self.entry.discard()
        else:
            self.client.unclaim(ident)
        if not isinstance(exc, Exception):
            raise exc
        cause, todo = explain(exc, "creating")
        raise UserError("creating", self.kind.name, ident, cause, f"{sentence}. {todo}") from exc

    def _stop_after_failed_create(self, ident: str) -> tuple[str, bool]:
        """Stop the object a failed create made (a 404 tried again: it was just made); the sentence saying how that
        went, and whether it is stopped. An accepted stop is checked (:func:`..stopping.took`)."""
        name, path = self.kind.name, self.kind.path
        by_hand = f"check it with GET {path}/{ident} and stop it if it is there (POST {path}/{ident}/stop)"
        try:
            outcome = stopping.stop(
                self.kind.collection,
                self.client,
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
            return f"It is already {state}: {self.kind.stopped_note}", True
        if outcome.outcome == stopping.REFUSED:
            assert outcome.error is not None  # a refusal is what makes the outcome REFUSED
            cause, _ = explain(outcome.error)
            log(f"{name} {ident}: create failed and stopping it failed: {cause}")
            return f"Stopping it failed too ({cause}); {by_hand}", False
        if not stopping.took(self.kind.collection, self.client, ident):
            log(f"{name} {ident}: create failed; stopping it was accepted, but it is still running")
            return (
                f"Stopping it was accepted {1 + len(stopping.STOP_CHECK_DELAYS)} times but did not take: it may "
                f"still be running; {by_hand}"
            ), False
        log(f"{name} {ident}: create failed; stopped it")
        return f"It has been stopped: {self.kind.stopped_note}", True


def _made_after(old: journal.Entry, found: ApiObject) -> str:
    """How long after ``old``'s first send (its writer's clock) the API stamped ``found`` (its clock)."""
    if not old.sends:
        return "an unknown time"
    seconds = (_aware(found.created_at) - min(old.sends)).total_seconds() - (old.clock_offset or 0.0)
    return format_elapsed(max(0.0, seconds))


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def _none_proven(entry: journal.Entry) -> str:
    """What to do when several objects match a create whose answer was lost: the user tells which is theirs."""
    return (
        "If one of them is this stack's, set adopt_id to its id and run `pulumi up`; if none is, run "
        f"`python -m pulumi_together_rl journal dismiss {entry.name}` and `pulumi up` to create a new one"
    )


def settle_adopted(kind: Kind[Obj, Req], client: TogetherRL, inputs: Props, ident: str) -> None:
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
