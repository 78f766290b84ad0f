"""One create as a transaction that owns its create journal entry, from the first write to the answer.

The ownership rule and the order of the writes are :mod:`pulumi_together_rl.ownership`'s. A create, here, is four
steps:

1. **open**: the journal of the stack is found (:func:`.journal.for_stack`) and checked at first use
   (:meth:`.journal.Journal.probe`: its conditional writes hold, and its clock): a journal that cannot be used
   refuses the create, and nothing is created.
2. **obtain**: the object an interrupted create of the same declaration made is taken over (its entry's lease
   taken by compare-and-swap; the object by the id it recorded, held to the declaration with the server's
   defaults filled in, or by a strict unique match inside its POST's own window), or the POST is sent through
   the client's reconciliation, this transaction being its :class:`~..client.reconcile.CreateRecord`: the entry
   is written with the snapshot and the send before the POST, then the id, then the id's claim. Ambiguous:
   nothing is taken, nothing is POSTed, and the error says what was found and who decides.
3. **settle**: the caller's wait (READY / RUNNING, and the kind's keep) runs with the object, the lease renewed.
4. **close**: the entry is marked done and released (the engine gets the answer, and the entry stays the record
   that the id is claimed); after a failure the object is stopped and the entry removed; once the engine is
   gone (:mod:`..lifeline`) nothing is stopped or marked done: the entry keeps the id for the next run.

:func:`create` is the one call the lifecycle makes, for a create and for an adopt (``adopt_id``: the object named
by the user's word, the fourth way to obtain it: :meth:`CreateTransaction.adopt`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Generic, NoReturn, TypeVar

from .. import backend, lifeline, stopping
from ..client.collections import Obj, Req
from ..client.models import ApiObject
from ..client.reconcile import AmbiguousCreate, Attribution, Rival
from ..messages import UserError, command, explain, format_elapsed, log
from ..resources.keys import OWNER_KEY
from . import journal, recovery
from .journal import Journal, Seen
from .leases import Holding, LeaseLost, Taken, held_keys, prune, taken
from .records import Declaration, Entry, State, now, stamp

if TYPE_CHECKING:
    from ..client.api import TogetherRL
    from ..resources.kind import Kind, Props

T = TypeVar("T")

SEND_LATE = 5.0
"""Seconds the journal write before a POST may take before the send is stamped again
(:meth:`CreateTransaction.sending`): a POST sent later than this after the send its entry records is one whose
window could miss its object."""

SEND_TRIES = 4
"""How many slow writes of a send (:data:`SEND_LATE`) :meth:`CreateTransaction.sending` makes before it refuses
the POST."""

STOP_PERSIST_WINDOW = 120.0
"""Seconds a stop after a failed create keeps trying through 429s, 5xx and connection failures (the failure
it cleans up after is often the same outage): long enough for a typical blip, bounded so a dead API still
ends the command with the id to stop by hand."""


def create(
    kind: Kind[Obj, Req],
    client: TogetherRL,
    inputs: Props,
    body: dict[str, Any],
    subject: str | None,
    settle: Callable[[Obj], T],
) -> T:
    """Create what ``inputs`` declare as one transaction (see the module docstring), or adopt the object their
    ``adopt_id`` names (:meth:`CreateTransaction.adopt`); ``body`` is the request as the journal may hold it
    (secrets redacted); ``settle(obj)`` waits for it (and keeps it) and gives the answer, inside the
    transaction: a created object whose settle fails is stopped, an adopted one never."""
    return CreateTransaction(kind, client, inputs, body, subject).run(settle)


class CreateTransaction(Generic[Obj, Req]):
    """One create of one declaration, owning its journal entry (see the module docstring); the client's
    :class:`~..client.reconcile.CreateRecord` while it POSTs."""

    def __init__(
        self,
        kind: Kind[Obj, Req],
        client: TogetherRL,
        inputs: Props,
        body: dict[str, Any],
        subject: str | None,
    ) -> None:
        self.kind = kind
        self.client = client
        self.inputs = inputs
        self.subject = subject
        self.request = kind.to_request(inputs)
        self.stack_backend = backend.locate()
        self.declared = Declaration.of(
            kind.name, client.base_url, body, inputs.get(OWNER_KEY), self.stack_backend.identity,
            self.stack_backend.location,
        )  # fmt: skip
        """What this create is of: its request, its owner, its stack backend."""
        self.journal: Journal
        self.held: Holding | None = None
        """The entry this create holds: the one it wrote before its POST, or the one it took over."""
        self._snapshot: list[str] = []
        self._offset: float | None = None

    def run(self, settle: Callable[[Obj], T]) -> T:
        """The transaction (see the module docstring); an adopt is the user's word for the object
        (:meth:`adopt`)."""
        if self.inputs.get("adopt_id"):
            return self.adopt(settle)
        self._open()
        created: Obj | None = None
        try:
            try:
                created = self._take_over() or self._post()
                if self.held is not None and self.held.entry.id != created.id:
                    self._record(created.id)
                    log(
                        f"{self.kind.name} {created.id}: created ({created.status.short}){self._waiting(created)}"
                    )
                ready = settle(created)
            except LeaseLost:
                self._lost(created.id if created is not None else None)
            except BaseException as exc:
                if created is None:
                    raise
                if lifeline.gone():
                    self._leave_for_next_run(created.id)  # nobody will get an answer
                    raise
                self._abandon(created.id, exc)
            if lifeline.gone():
                self._leave_for_next_run(created.id)
            else:
                self._done(created.id)
            return ready
        except LeaseLost:
            self._lost(created.id if created is not None else None)
        finally:
            if self.held is not None and self.held.held:
                with contextlib.suppress(journal.Refused, LeaseLost):
                    self.held.release()  # whatever it records stays in the journal for the next run

    def _waiting(self, found: Obj) -> str:
        """What a line adds about the wait to come: nothing when it is there already."""
        return "" if found.status == self.kind.target else f"; waiting for {self.kind.target.short}"

    # ------------------------------------------------------------------------------------------ adopt

    def adopt(self, settle: Callable[[Obj], T]) -> T:
        """Take over the object ``adopt_id`` names, on the user's word: it must be adoptable and match the declared
        inputs; its in-place inputs are PATCHed to the declared ones; then ``settle``. Never stopped on failure (it
        existed before this program), and no journal entry: the state records it with the answer. Once it is the
        declaration's, the interrupted creates of the declaration that got no answer are resolved
        (:func:`settle_adopted`): their windows must never hand a look-alike to a later create."""
        ident = str(self.inputs["adopt_id"])
        kind, name = self.kind, self.kind.name
        try:
            live = kind.find(self.client, ident)
            if live is None:
                raise UserError("adopting", name, ident, "it does not exist", f"Check adopt_id (GET {kind.path}), or remove it to create a new one")  # fmt: skip
            if live.status not in kind.adoptable:
                allowed = " or ".join(sorted(s.short for s in kind.adoptable))
                raise UserError("adopting", name, ident, f"it is {live.status.short}", f"Only a {name} that is "
                                f"{allowed} can be adopted: remove adopt_id to create a new one")  # fmt: skip
            mismatched = kind.differences(self.inputs, live)
            if mismatched:
                raise UserError("adopting", name, ident, f"its settings differ from the declared inputs: "
                                f"{'; '.join(mismatched)}", "Declare the inputs it was created with, or remove "
                                "adopt_id to create a new one")  # fmt: skip
            patch = kind.patch(kind.inputs_from_api(live), self.inputs)
            if patch:
                live = kind.collection.patch(self.client, ident, patch)
            made = settle(live)
        except UserError:
            raise
        except Exception as exc:
            raise UserError("adopting", name, ident, *explain(exc, "adopting")) from exc
        self._settle_adopted(ident)
        return made

    def _settle_adopted(self, ident: str) -> None:
        """``adopt_id`` named this declaration's object: the user's choice resolves the interrupted creates of the
        declaration that got no answer (an ambiguity it was told to settle this way). Their windows must never hand
        a look-alike to a later create of the declaration once the adopted object is gone. Entries with an id
        stay: that id is proven this declaration's, and a later create takes it over if it is still there."""
        found = journal.for_stack(self.stack_backend)
        for seen in journal.interrupted(found, self.declared, held=held_keys()):
            if seen.entry.id:
                continue
            with taken(seen) as held:
                if held is None:
                    continue
                held.remove()
                log(
                    f"{self.kind.name} {ident}: adopted; dropped the journal entry of the interrupted create of this "
                    f"declaration at {stamp(seen.entry.started_at)} (it got no answer)"
                )

    # ------------------------------------------------------------------------------------------ open

    def _open(self) -> None:
        try:
            self.journal = journal.for_stack(self.stack_backend)
            self.journal.probe()
        except journal.Refused as exc:
            if hasattr(self, "journal"):
                journal.forget(self.journal)
            raise UserError(
                "creating", self.kind.name, self.subject, exc.cause, f"{exc.todo}; nothing was created"
            ) from None
        prune(
            self.journal,
            self.declared.request,
            ended_after=journal.MAX_AGE,
            forget_after=journal.FORGET_AFTER,
        )

    # ------------------------------------------------------------------------------------------ the record

    def posting(self, snapshot: Iterable[str], clock_offset: float | None) -> None:
        """Before the first send: the ids the API already showed (none of them can be what it makes), and how far
        the API's clock is ahead of this machine's. Written with the first send."""
        self._snapshot = sorted(set(snapshot))
        self._offset = clock_offset

    def sending(self) -> None:
        """Just before each POST: the entry written (its first write: with the snapshot) with this send, the start
        of the POST's window. Raises :class:`.journal.Refused` (then the POST is not sent).

        A write that took longer than :data:`SEND_LATE` (a store slow to answer) is followed by another that
        stamps the send again: the window of a POST that gets no answer ends :data:`~.records.POST_BOUND` after
        its last recorded send, and a POST sent a minute after the send it recorded would make its object outside
        that window, where a later run, its answer lost, would never look for it (and would POST a second one).
        A store that is that slow :data:`SEND_TRIES` times running refuses the POST."""
        for _ in range(SEND_TRIES):
            sent, began = now(), time.monotonic()
            if self.held is None:
                self.held = Holding.begin(
                    self.journal,
                    Entry(
                        kind=self.kind.name,
                        base_url=self.declared.base_url,
                        body=self.declared.body,
                        owner=self.declared.owner,
                        backend=self.declared.backend,
                        backend_location=self.declared.backend_location,
                        started_at=sent,
                        state=State.POSTING,
                        snapshot=self._snapshot,
                        sends=[sent],
                        clock_offset=self._offset,
                    ),
                )
            else:
                self.held.write(
                    sends=[*self.held.entry.sends, sent], answered_at=None, clock_offset=self._offset
                )
            if time.monotonic() - began <= SEND_LATE:
                return
        raise journal.Refused(
            self.journal.location,
            f"the journal's store took more than {SEND_LATE:g} s to take each of {SEND_TRIES} writes of this "
            "create's send, so the POST was not sent (its object could land outside the window its entry records)",
            "Run the command again once the store answers promptly",
        )

    def answered(self, refused: bool = False) -> None:
        """The POST (and any reconciliation after it) ended without an id: its window is closed; ``refused``: the
        API itself answered that it failed. Never raises: an entry that cannot record it keeps the wider window
        (its last send plus the POST bound), which only makes later lookups more careful."""
        if self.held is not None:
            with contextlib.suppress(journal.Refused, LeaseLost):
                self.held.write(answered_at=now(), refused=refused)

    def judge(self, ids: Sequence[str]) -> Mapping[str, str]:
        """What the journal proves of ``ids`` (:meth:`.journal.Journal.judge`)."""
        mine = self.held.key if self.held is not None else None
        among = self.journal.entries(request=self.declared.request, warn=None)
        return {k: v.value for k, v in self.journal.judge(self.declared.base_url, ids, among, mine).items()}

    def rivals(self) -> list[Rival]:
        """Windows of the other unanswered creates of the same request."""
        return journal.rivals(self.journal.entries(request=self.declared.request, warn=None), held_keys())

    # ------------------------------------------------------------------------------------------ obtain

    def _post(self) -> Obj:
        """POST the create through the client's reconciliation, this transaction recording it."""
        try:
            return self.kind.collection.create(self.client, self.request, self)
        except journal.Refused as exc:
            raise UserError(
                "creating", self.kind.name, self.subject, exc.cause, f"{exc.todo}; nothing was created"
            ) from None
        except LeaseLost:
            raise
        except Exception as exc:
            maybe = bool(getattr(exc, "maybe_created", False))
            if not maybe and self.held is not None:
                with contextlib.suppress(journal.Refused):
                    self.held.remove()  # refused, or nothing sent: nothing can be billing
                self.held = None
            cause, todo = explain(exc, "creating")
            if isinstance(getattr(exc, "lookup_error", None), AmbiguousCreate):
                # Another run would find the same look-alikes: only the user can tell.
                todo = _none_proven(self.held.name if self.held is not None else "<entry>")
            elif maybe:
                todo = (
                    "Run `pulumi up` again: the create journal takes it over if it shows up and can be told apart "
                    "from others, and makes a new one only if nothing was made; elsewhere, "
                    + todo[0].lower()
                    + todo[1:]
                )
            raise UserError("creating", self.kind.name, self.subject, cause, todo) from exc

    def _record(self, ident: str) -> None:
        """Record the id the POST answered: in the entry first, then the id's claim. An entry that cannot be
        written (a full disk, a store gone) fails nothing: the id goes to the engine with the answer, which is
        the record that matters; the line says what is not protected. An id learnt after losing the lease goes
        to an entry of its own."""
        assert self.held is not None
        try:
            self.held.write(id=ident, state=State.CREATED, answered_at=self.held.entry.answered_at or now())
        except LeaseLost:
            self._keep_lost(ident)
        except journal.Refused as exc:
            self.held.unrecorded = ident
            log(
                f"warning: {self.kind.name} {ident}: created, but the create journal could not record its id "
                f"({exc.cause}); the create goes on and the id reaches the stack's state with its answer. If this "
                f"`pulumi up` is interrupted before it ends, check it with GET {self.kind.path}/{ident} and stop it "
                f"(POST {self.kind.path}/{ident}/stop) if no stack holds it"
            )
            return
        # The entry records the id now: a claim that cannot be written leaves it recorded (the next run of this
        # declaration takes it over from the entry), so this is not the case above.
        try:
            self.held.bind(ident)
        except Taken as exc:
            log(
                f"warning: {self.kind.name} {ident}: this create's POST made it, but the create journal's claim of "
                f"it names {exc.claim.owner or 'another create'}'s entry {exc.claim.entry}; the create goes on"
            )
        except journal.Refused as exc:
            log(
                f"warning: {self.kind.name} {ident}: created, and the create journal's entry records its id, but "
                f"its claim of the id could not be written ({exc.cause}); the create goes on"
            )

    def _keep_lost(self, ident: str) -> NoReturn:
        """An id this process learnt after its lease was taken over: recorded in an entry of its own (released: the
        next run, or the orphan finder, sees it), never in the entry it lost."""
        assert self.held is not None
        lost = self.held
        with contextlib.suppress(journal.Refused, LeaseLost, Taken):
            kept = Holding.begin(
                self.journal,
                lost.entry.model_copy(
                    update={
                        "id": ident,
                        "state": State.CREATED,
                        "note": f"made by a create that lost its lease on entry {lost.name} (paused past it) at "
                        f"{stamp(now())}",
                    }
                ),
            )
            kept.bind(ident)
            kept.release()
        raise LeaseLost(lost.key)

    def _take_over(self) -> Obj | None:
        """The active object an interrupted create of the same declaration made, if any (its entry is then this
        transaction's), else None. Raises when it cannot tell (the API failed, several objects match, the entry
        names an object that is not what is declared, an entry of an earlier release cannot say whose stack it
        was)."""
        self._unattributed()
        self._await_leases()
        for seen in journal.interrupted(self.journal, self.declared, held=held_keys()):
            held = Holding.take(seen)
            if held is None:
                continue  # a run holds it now (or another thread of this one took it first)
            found = self._look(held)
            if found is not None and found.status not in self.kind.collection.ended:
                self._take(held, found)
                return found
            old = held.entry
            if old.id:
                state = "not found" if found is None else found.status.short
                log(
                    f"{self.kind.name} {old.id}: an interrupted create made it at {stamp(old.started_at)}; it is {state} now"
                )
                held.remove()  # proven gone (or another declaration's now): nothing of it is left billing
            elif old.sends:
                # Nothing it could have made shows up: kept, so that the orphan finder can still label what it
                # made; its window is in the past, so it never matches again.
                held.release(
                    f"looked for at {stamp(now())} by a later create: nothing it could have made was found"
                )
            else:
                held.remove()  # it sent nothing
        return None

    def _look(self, held: Holding) -> Obj | None:
        """What the interrupted create of ``held`` made (None: nothing active), the entry released when looking
        raises."""
        old = held.entry
        when = stamp(old.started_at)
        try:
            return self._interrupted_object(held)
        except UserError:
            _let_go(held)
            raise
        except AmbiguousCreate as exc:
            _let_go(held)
            raise UserError(
                "creating",
                self.kind.name,
                self.subject,
                f"an interrupted `pulumi up` of this declaration ({when}) asked for it and never got the answer, "
                f"and {exc}{self._priced()}",
                _none_proven(held.name),
            ) from exc
        except Exception as exc:
            # Could not look: creating now might make a second one. Leave the entry for the next run and stop.
            _let_go(held)
            cause, _ = explain(exc)
            raise UserError(
                "creating",
                self.kind.name,
                old.id or self.subject,
                f"an interrupted `pulumi up` ({when}) may have made this {self.kind.name}, and looking for it "
                f"failed ({cause})",
                "Run `pulumi up` again once the API answers: it takes the object over if it exists",
            ) from exc

    def _take(self, held: Holding, found: Obj) -> None:
        """``found`` is what ``held``'s create made: its id in the entry, then its claim; the entry this
        transaction's from now on."""
        old = held.entry
        when = stamp(old.started_at)
        try:
            if old.id != found.id:
                held.write(id=found.id, state=State.CREATED)
            held.bind(found.id)
        except Taken as exc:
            # Another entry that records the id claimed it first: it is not this declaration's. The entry drops
            # the id, so that the next run looks again (and the object, that other entry's, is left alone).
            self.client.unclaim(found.id)
            with contextlib.suppress(journal.Refused, LeaseLost):
                held.release(
                    f"its id {found.id} was claimed first by {exc.claim.owner or 'another create'}", id=None
                )
            raise UserError(
                "creating",
                self.kind.name,
                found.id,
                f"it matched what an interrupted `pulumi up` of this declaration ({when}) asked for, but "
                f"{exc.claim.owner or 'another create'} recorded it first, so it was not taken and nothing was created",
                "Run `pulumi up` again: it looks again, and creates a new one only if nothing of this declaration's "
                "is left",
            ) from None
        self.held = held
        how = (
            "created it"
            if old.id
            else (
                "asked for one and never got the answer; this one is taken by a match, not an answer: it is the one "
                f"new {self.kind.name} that matches, made {_made_after(old, found)} after that POST was sent, "
                f"{format_elapsed(max(0.0, (now() - _aware(found.created_at)).total_seconds()))} ago,"
            )
        )
        advice = "" if recovery.recovered(old.note) else " " + recovery.after_take_over(self.declared.owner)
        log(
            f"{self.kind.name} {found.id}: taking it over: an interrupted `pulumi up` of this declaration {how} at "
            f"{when} and no state recorded it ({found.status.short}){self._waiting(found)}.{advice}"
        )
        if old.note == lifeline.GONE_NOTE:
            log(recovery.after_killed_engine(self.declared.owner, found.id))

    def _await_leases(self) -> None:
        """An interrupted create of this declaration whose lease is still live (a runner killed a moment ago) is
        waited for until its lease runs out: it is taken over then, never while live. One that is renewed
        meanwhile is a run at work: nothing is created beside it."""

        def live() -> list[Seen]:
            return journal.live_leases(self.journal, self.declared, held=held_keys())

        still = journal.outlast(
            live,
            lambda wait, seen: log(
                f"{self.kind.name}: an earlier create of this declaration holds a live create journal lease "
                f"({seen[0].entry.describe()}); waiting up to {format_elapsed(wait)} for it to end or run out"
            ),
        )
        if still:
            raise UserError(
                "creating",
                self.kind.name,
                still[0].entry.id or self.subject,
                f"another run is creating this declaration now ({still[0].entry.describe()}), and its create journal "
                "lease is still being renewed, so nothing was taken and nothing was created",
                "Let that run finish; if it is gone, its lease runs out within "
                f"{format_elapsed(still[0].left())}: run `pulumi up` again then",
            )

    def _interrupted_object(self, held: Holding) -> Obj | None:
        """What an interrupted create made: by id when it got that far, else by a strict unique match inside that
        create's snapshot and POST window (None: it sent nothing, or nothing it made is active)."""
        old = held.entry
        if old.id:
            found = self.kind.find(self.client, old.id)
            if found is not None and found.status not in self.kind.collection.ended:
                # The entry is the proof, and an entry is bytes in a store: an object that is not what the
                # declaration makes (the server's defaults filled in, as a match is judged) was not made by its
                # create, whatever the entry says.
                mismatched = self.kind.collection.mismatches(self.client, self.request, found)
                if mismatched:
                    raise UserError(
                        "creating",
                        self.kind.name,
                        old.id,
                        f"the create journal entry {held.where} says an interrupted `pulumi up` of this declaration "
                        f"made it, but it is not what this declaration asks for ({'; '.join(mismatched)}), so it was "
                        "not taken and nothing was created",
                        f"If that entry is not yours, remove it (`{command(f'journal prune {held.name}')}`) and "
                        "run `pulumi up` again",
                    )
            # Claimed for this create (a match is claimed by the lookup): two declarations never get one object.
            return found if found is None or self.client.claim(found.id) else None
        window = old.window()
        if old.snapshot is None or window is None:
            return None  # killed before its POST: nothing was sent
        # A list can lag a create: right after the interrupted POST, its object may not be listed yet while a
        # look-alike is. Look only once the list has had time to show it.
        lag = (max(old.sends) + timedelta(seconds=self.client.list_lag)) - now()
        if lag.total_seconds() > 0:
            time.sleep(lag.total_seconds())
        taking = not old.refused or self.kind.collection.answered_lookalike_is_ours

        def judge(ids: Sequence[str]) -> Mapping[str, str]:
            among = self.journal.entries(request=self.declared.request, warn=None)
            return {
                k: v.value
                for k, v in self.journal.judge(self.declared.base_url, ids, among, held.key).items()
            }

        attribution = Attribution(
            frozenset(old.snapshot),
            window,
            offset=old.clock_offset,
            judge=judge,
            rivals=lambda: journal.rivals(
                self.journal.entries(request=self.declared.request, warn=None), held_keys()
            ),
            claim=taking,
        )
        found = self.kind.collection.find(self.client, self.request, attribution)
        if found is not None and not taking:
            # The API answered that POST with its own failure, and for this kind a look-alike is then as likely a
            # colleague's (:data:`..client.reconcile.ANSWERED_LOOKALIKE_RULE`).
            raise AmbiguousCreate(self.kind.name, [found], False, refused=True)
        return found

    def _unattributed(self) -> None:
        """Entries an earlier release left for this owner and request without recording the stack's backend: what
        they made may be this stack's or a namesake's in another backend. Nothing is taken and nothing created while
        one may hold an active object; the user says whose it is."""
        for seen in journal.unattributed(self.journal, self.declared):
            old = seen.entry
            if not old.sends and not old.id:
                with taken(seen) as held:
                    if held is not None:
                        held.remove()  # killed before its POST: it sent nothing
                continue
            when = stamp(old.started_at)
            if old.id:
                found = self.kind.find(self.client, old.id)
                if found is None or found.status in self.kind.collection.ended:
                    with taken(seen) as held:
                        if held is not None:
                            held.remove()  # proven gone: nothing of it is left billing
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
                f"If it is this stack's, {todo} and run `pulumi up`; if not, run `{command(f'journal dismiss {seen.name}')}` and `pulumi up` to create a new one",
            )

    def _priced(self) -> str:
        try:
            price = self.kind.price(self.client, self.request)
        except Exception:  # a price is a courtesy: the report goes out without it
            return ""
        return f"; each costs about {price}" if price else ""

    # ------------------------------------------------------------------------------------------ close

    def _done(self, ident: str) -> None:
        """The engine is getting the answer: the entry becomes the record that the id is claimed."""
        assert self.held is not None
        try:
            self.held.release(state=State.DONE)
        except journal.Refused as exc:
            log(
                f"warning: {self.kind.name} {ident}: created; the create journal could not mark it done ({exc.cause})"
            )

    def _leave_for_next_run(self, ident: str) -> None:
        """The engine is gone before its answer: the entry keeps the id for the next run to take over. An id the
        journal could not record would reach nobody: the object is then stopped, as after a failed create."""
        assert self.held is not None
        try:
            if self.held.unrecorded is None:
                self.held.release(lifeline.GONE_NOTE)
                return
        except journal.Refused as exc:
            log(
                f"{self.kind.name} {ident}: the engine is gone and the create journal cannot keep the id ({exc.cause})"
            )
        sentence, stopped = self._stop_after_failed_create(ident)
        if stopped:
            with contextlib.suppress(journal.Refused):
                self.held.remove()
        log(f"{self.kind.name} {ident}: no state and no journal entry will hold it: {sentence}")

    def _lost(self, ident: str | None) -> NoReturn:
        """This create's lease was taken over while it could not renew it (paused, cut off from the store): the
        run that took it over owns the object now. Nothing is stopped, nothing marked done."""
        what = f"its object ({ident}) and " if ident else ""
        raise UserError(
            "creating",
            self.kind.name,
            ident or self.subject,
            f"this run lost its create journal lease (it could not renew it for {journal.lease_seconds():g} s: "
            f"paused, or cut off from {self.journal.location}) and another run took the create over, so {what}the "
            "entry are that run's; nothing was stopped or marked done here",
            "Let the other run finish, then run `pulumi preview` to see the stack as it left it",
        )

    def _unconfirmed(self, ident: str, exc: BaseException, unreachable: journal.Unreachable) -> NoReturn:
        """After a failed create whose journal cannot be reached: whether another run has taken the create over
        cannot be known, so nothing is stopped (it may be that run's now) and nothing marked done."""
        if not isinstance(exc, Exception):
            raise exc
        cause, _ = explain(exc, "creating")
        kept = (
            "the journal holds its POST but could not record its id either, so the next run looks for it by a match"
            if self.held is not None and self.held.unrecorded
            else "the journal keeps its id"
        )
        raise UserError(
            "creating",
            self.kind.name,
            ident,
            f"{cause}; it was not stopped, because the create journal at {self.journal.location} could not confirm "
            f"that this run still holds the create ({unreachable.reason}), and another run may have taken it over; "
            f"{kept}",
            "Once that store can be reached, run `pulumi up` again: it takes the object over if it is still active "
            f"(or stop it yourself: POST {self.kind.path}/{ident}/stop)",
        ) from exc

    def _abandon(self, ident: str, exc: BaseException) -> NoReturn:
        """After a failed create: stop what was made, then raise the error naming the id (``KeyboardInterrupt`` and
        ``SystemExit`` are re-raised as they are, after the stop). A stop that failed leaves the entry, and the
        object unclaimed, for the next create of the declaration. A create that lost its lease stops nothing: the
        run that took it over owns the object; nor does one that cannot reach its journal to tell."""
        assert self.held is not None
        try:
            held = self.held.still_held()
        except journal.Unreachable as unreachable:
            self._unconfirmed(ident, exc, unreachable)
        if not held:
            self._lost(ident)
        sentence, stopped = self._stop_after_failed_create(ident)
        if stopped:
            with contextlib.suppress(journal.Refused):
                self.held.remove()
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


def _let_go(held: Holding) -> None:
    """Release ``held`` on the way out of an error the user must read: a journal that cannot take the write
    keeps the lease, which runs out by itself."""
    with contextlib.suppress(journal.Refused, LeaseLost):
        held.release()


def _made_after(old: Entry, found: ApiObject) -> str:
    """How long after ``old``'s first send (its writer's clock) the API stamped ``found`` (its clock)."""
    if not old.sends:
        return "an unknown time"
    seconds = (_aware(found.created_at) - min(old.sends)).total_seconds() - (old.clock_offset or 0.0)
    return format_elapsed(max(0.0, seconds))


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def _none_proven(name: str) -> str:
    """What to do when several objects match a create whose answer was lost: the user tells which is theirs."""
    return (
        "If one of them is this stack's, set adopt_id to its id and run `pulumi up`; if none is, run "
        f"`{command(f'journal dismiss {name}')}` and `pulumi up` to create a new one"
    )
