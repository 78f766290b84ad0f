"""The create journal's protocol as a state machine over the real code (design rule 17; Hypothesis
``RuleBasedStateMachine``): random sequences of creates, crashes after any write, stragglers, expired leases, skewed
clocks, stores that drop a conditional header, planted entries and claims, a colleague's identical creates and
``recover``, each followed by the invariants; a failure is shrunk to a shortest sequence.

**What runs.** Every create is the real :class:`~pulumi_together_rl.ownership.transaction.CreateTransaction`
(``transaction.create``, what ``resources/lifecycle.py`` calls) with a real client against the emulator; its journal
is the real :class:`~pulumi_together_rl.ownership.journal.Journal` and :class:`~pulumi_together_rl.ownership.leases.Holding`
over an in-memory store (:mod:`harness.memory_store`) that behaves like a bucket. ``recover`` is the real
:func:`~pulumi_together_rl.ownership.recovery.plan` and its writes (``recovery._note``) on a stack state the model
keeps. Nothing of the protocol is re-implemented here; the model only decides what happens next and what the world
looks like (:mod:`tests.model.world` says how several processes share this one).

**Actors.** Runners ``r0``, ``r1``, ``r2``: ``pulumi up`` of ONE declaration (owner ``organization/test/dev/gpu``,
the same kind, request and stack backend), each start a new process (its own journal, probed at first use; its own
claims and registry), on machines whose clocks may be wrong. A colleague: another stack's declaration
(``organization/test/prod/gpu``) with the identical request, the same API key and the same journal store (the team's
bucket), driven by the same rules.

**Rules.** ``start`` a create (running free, or pausing at its k-th write event: before a write is sent or right
after it landed; or lingering at work in its settle); ``advance`` a paused runner by n write events; ``wake`` it (to
its end: a straggler's return); ``crash`` it where it is paused (it does nothing more: its holdings are abandoned,
``leases.forget``); ``renew`` (one beat of a paused runner's renewal thread); ``expire`` (every clock moves past
every lease; runners at work renew meanwhile, frozen ones do not); ``tick`` (time moves 1 to 70 s); ``skew`` (the
next process of a runner has a clock off by up to an hour); ``drop_header`` (the store ignores If-None-Match or
If-Match: a fresh process must be refused at first use, having written nothing and POSTed nothing);
``plant_claim`` (a claim naming an entry that does not exist, on an object or an unknown id);
``plant_entry`` (an entry of this declaration naming the colleague's recorded object); ``stop_object`` (a user,
or the idle timeout, stops an object); ``recover`` (the real plan on the model's stack state: the pending create a
crashed runner left, a done entry reopened, ...).

**Invariants** (after every step):

1. *No silent GPU*: every active object a runner of the declaration made is named by the stack's state, or by an
   entry of the declaration that records its id, or lies in the POST window of an entry of the declaration that has
   no id (the next create's match looks there).
2. *Nothing of another's is taken*: no id the colleague made is ever the declaration's (state, a create's answer,
   an entry of the declaration not planted by the model), and no id the declaration's runners made is ever the
   colleague's.
3. *No live lease is taken over*: every write that replaced an entry's lease holder with another came at least the
   lease's length (on the store's clock) after the holder's last write.
4. *A create that answers leaves its record*: when a create returns an id, an entry of its declaration records that
   id, done and released, and the id's claim names an entry that records it.

**Convergence** (at the end of every example): every paused runner dies, faults are cleared, dead leases expire,
``recover`` runs if a pending create is left; then one more create of the declaration (again only when it says
"Run `pulumi up` again") ends with the state holding exactly one active object of the declaration's, and every other
active object of the declaration's is named by the journal (1.). It may refuse only where an ambiguity is real: a
look-alike of the colleague's, a planted claim, or two objects of the declaration's in one unanswered POST window.

**Profiles.** ``check`` (the check tier: 5 examples of 25 steps, ~20 s) and ``release`` (``pytest.mark.release``,
30 examples of 30 steps, about a minute). Failing examples are kept in ``tests/model/examples/`` (Hypothesis's directory database, replayed first) and
as the regression tests at the end of this file (shrunk sequences). ``pytest tests/model -s`` prints the number of
examples and steps and what they did.
"""

from __future__ import annotations

import collections
import json
import sys
import time
import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from hypothesis import HealthCheck, Phase, note, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import InvalidArgument
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from pulumi_together_rl import backend
from pulumi_together_rl.client.models import LIVE_RESOURCE_STATUSES
from pulumi_together_rl.client.reconcile import _within
from pulumi_together_rl.orphans.states import parse_state
from pulumi_together_rl.ownership import journal, recovery
from pulumi_together_rl.ownership.journal import Seen
from pulumi_together_rl.ownership.records import (
    ENDED,
    Claim,
    Entry,
    Lease,
    State,
    declaration_key,
    dump,
    parse_claim,
    parse_entry,
    request_key,
)
from pulumi_together_rl.resources.model_resource_schema import MODEL_RESOURCE

from .world import MODEL, Proc, World

OWNER = "organization/test/dev/gpu"
COLLEAGUE = "organization/test/prod/gpu"
RUNNERS = ("r0", "r1", "r2")
SLOTS = (*RUNNERS, "colleague")
URN = "urn:pulumi:dev::test::pulumi-python:dynamic/together:ModelResource::gpu"
RESOURCE_TYPE = "pulumi-python:dynamic/together:ModelResource"
LIVE = {s.value for s in LIVE_RESOURCE_STATUSES}
BODY = MODEL_RESOURCE.to_request({"base_model": MODEL}).to_wire()
EXAMPLES = Path(__file__).with_name("examples")
AGAIN = "Run `pulumi up` again"


def say(line: str) -> None:
    """A line of the story of an example: Hypothesis prints it with a failing one; a replayed sequence prints it."""
    try:
        note(line)
    except InvalidArgument:  # outside Hypothesis: a replayed sequence
        print(line)


def _created(obj: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(str(obj["created_at"]).replace("Z", "+00:00"))


class JournalMachine(RuleBasedStateMachine):
    """See the module docstring. :attr:`world` is set by the test that runs it."""

    world: ClassVar[World]
    stats: ClassVar[collections.Counter[str]] = collections.Counter()

    def __init__(self) -> None:
        super().__init__()
        self.w = type(self).world
        self.w.reset()
        here = backend.locate().identity
        base = self.w.base_url
        self.decl = declaration_key(MODEL_RESOURCE.name, base, BODY, OWNER, here)
        self.theirs_decl = declaration_key(MODEL_RESOURCE.name, base, BODY, COLLEAGUE, here)
        self.request = request_key(MODEL_RESOURCE.name, base, BODY)
        self.backend = here
        self.state_id: str | None = None
        """The id the stack's state holds for the declaration (the engine got a create's answer)."""
        self.pending = False
        """The stack's state holds a pending create of the declaration (a runner's engine died with it)."""
        self.colleague_id: str | None = None
        self.running: dict[str, Proc] = {}
        """Each slot's current process, while it is paused (else the slot is free)."""
        self.skews = dict.fromkeys(SLOTS, 0.0)
        self.made: dict[str, str] = {}
        """Who made each object: a slot, or ``someone`` for what the model cannot attribute."""
        self.planted_entries: set[str] = set()
        self.planted_claims: set[str] = set()
        self.history_seen = 0
        self._objects: tuple[int, list[dict[str, Any]]] | None = None
        type(self).stats["examples"] += 1

    # ------------------------------------------------------------------------------------ what is there

    def objects(self) -> list[dict[str, Any]]:
        """The emulator's model resources (read again only once something may have changed them)."""
        if self._objects is None or self._objects[0] != self.w.moves:
            self._objects = (self.w.moves, list(self.w.control.state()["model_resources"]))
        return self._objects[1]

    def active(self) -> dict[str, dict[str, Any]]:
        return {o["id"]: o for o in self.objects() if o["status"] in LIVE}

    def entries(self) -> list[Seen]:
        return self.w.observer.journal.entries(warn=None)

    def _attribute(self, actor: str) -> None:
        """Objects that appeared during the step are ``actor``'s: only one actor runs at a time."""
        for obj in self.objects():
            self.made.setdefault(obj["id"], actor)

    def in_order(self, ids: Iterable[str]) -> list[str]:
        """``ids`` in the order they were made (ids are random: an order of their own would not replay)."""
        wanted = set(ids)
        return [i for i in self.made if i in wanted]

    def ours(self, ident: str) -> bool:
        return self.made.get(ident) in RUNNERS

    def accounted(self, ident: str, obj: dict[str, Any], seen: list[Seen]) -> str | None:
        """How the state or the journal names an object of the declaration's; None: it does not (it is silent)."""
        if ident == self.state_id:
            return "the state"
        for s in seen:
            entry = s.entry
            if entry.key != self.decl or entry.state == State.DISMISSED:
                continue
            if entry.id == ident:
                return f"entry {s.name} ({entry.state.value})"
            window = entry.window()
            if not entry.id and window is not None and _within(_created(obj), window, entry.clock_offset):
                return f"the window of entry {s.name}"
        return None

    # ------------------------------------------------------------------------------------ running a process

    def _free(self, slot: str) -> bool:
        return slot not in self.running

    def _may_start(self, slot: str) -> bool:
        if not self._free(slot):
            return False
        held = self.colleague_id if slot == "colleague" else self.state_id
        return held is None or held not in self.active()  # `pulumi up --refresh`: a stopped one is gone

    def _startable(self) -> list[str]:
        return [s for s in SLOTS if self._may_start(s)]

    def _launch(self, slot: str, stop_at: int | None, linger: bool) -> Proc:
        if slot != "colleague":
            if self.state_id is not None and self.state_id not in self.active():
                self.state_id = None
        elif self.colleague_id is not None and self.colleague_id not in self.active():
            self.colleague_id = None
        owner = COLLEAGUE if slot == "colleague" else OWNER
        proc = self.w.spawn(f"{slot}.{len(self.w.procs)}", owner, self.skews[slot])
        self.running[slot] = proc
        proc.launch(stop_at, linger)
        self._after(slot, proc)
        return proc

    def _after(self, slot: str, proc: Proc) -> None:
        """What a step of ``slot``'s process left: its objects attributed, and if it ended, its engine's answer."""
        self._attribute(slot)
        if proc.status == "paused":
            say(f"  {proc.name} paused {proc.where}{' (at work)' if proc.busy else ''}")
            return
        del self.running[slot]
        assert proc.outcome is not None
        what, detail = proc.outcome
        type(self).stats[f"create {what}"] += 1
        say(f"  {proc.name} ended: {what} {detail[:300]}")
        assert what != "bug", f"runner {proc.name} raised what no create may raise:\n{detail}"
        if what == "crashed":
            if slot != "colleague":
                self.pending = True  # its engine died with it: the state keeps a pending create
            return
        if what == "refused":
            return
        ident = detail
        self._leaves_its_record(proc, ident)
        if slot == "colleague":
            self.colleague_id = ident
        else:
            self.state_id = ident

    def _leaves_its_record(self, proc: Proc, ident: str) -> None:
        """Invariant 4, at the moment a create answers."""
        decl = self.theirs_decl if proc.owner == COLLEAGUE else self.decl
        seen = self.entries()
        done = [
            s
            for s in seen
            if s.entry.key == decl
            and s.entry.id == ident
            and s.entry.state == State.DONE
            and s.entry.lease is not None
            and s.entry.lease.holder is None
        ]
        assert done, (
            f"{proc.name}'s create answered {ident}, but no entry of its declaration records it done and released: "
            + "; ".join(f"{s.name}: {s.entry.state.value} id={s.entry.id}" for s in seen)
        )
        found = self.w.observer.journal.claim(self.w.base_url, ident)
        assert found is not None and found[0] is not None, (
            f"{proc.name}'s create answered {ident} with no claim"
        )
        named = self.w.observer.journal.read(found[0].entry, warn=None)
        assert named is not None and named.entry.id == ident, (
            f"{proc.name}'s create answered {ident}, but its claim names {found[0].entry}, which does not record it"
        )

    def _pick(self, who: int, among: list[str]) -> str:
        return among[who % len(among)]

    def _paused(self) -> list[str]:
        return [s for s in SLOTS if s in self.running]

    # ------------------------------------------------------------------------------------ rules

    @precondition(lambda self: bool(self._startable()))
    @rule(
        who=st.integers(0, 3),
        # Events 0-9 are the probe's five writes, 10-17 a create's entry, id, claim and done (before and after
        # each): weighted towards those.
        stop_at=st.one_of(st.none(), st.integers(10, 18), st.integers(0, 30)),
        linger=st.booleans(),
    )
    def start(self, who: int, stop_at: int | None, linger: bool) -> None:
        """A ``pulumi up`` of the slot's declaration: a new process whose create runs free (``stop_at`` None) or
        pauses at its ``stop_at``-th write event; ``linger``: it pauses at work in its settle."""
        slot = self._pick(who, self._startable())
        say(f"start {slot} (stop at event {stop_at}, linger {linger}, skew {self.skews[slot]:+g} s)")
        self._launch(slot, stop_at, linger)

    @precondition(lambda self: bool(self._startable()))
    @rule(
        who=st.integers(0, 3), event=st.one_of(st.sampled_from([11, 13, 15, 17, 19, 21]), st.integers(0, 23))
    )
    def crash_at(self, who: int, event: int) -> None:
        """A ``pulumi up`` killed at a crash point of its create: right after a write landed (odd events), or right
        before one is sent (even events): 0 to 9 are its probe's five writes, from 10 on its create's or take-over's
        (weighted towards right after one of those landed: the crash points of the write order)."""
        slot = self._pick(who, self._startable())
        say(f"crash_at {slot} at event {event} (skew {self.skews[slot]:+g} s)")
        proc = self._launch(slot, event, False)
        if proc.status == "paused":
            say(f"  crash {proc.name} {proc.where}")
            proc.crash()
            self._after(slot, proc)

    @precondition(lambda self: bool(self._paused()))
    @rule(who=st.integers(0, 3), events=st.integers(0, 8))
    def advance(self, who: int, events: int) -> None:
        slot = self._pick(who, self._paused())
        proc = self.running[slot]
        say(f"advance {slot} ({proc.name}) by {events} write events")
        proc.resume(events)
        self._after(slot, proc)

    def until_posted(self, who: int) -> None:
        """For the replayed sequences: advance a paused runner one write event at a time until its POST has made an
        object (it is then paused right before its next write), or it ends."""
        slot = self._pick(who, self._paused())
        proc = self.running[slot]
        before = set(self.made)
        while proc.status == "paused" and not set(self.objects_ids()) - before:
            proc.resume(0)
            self._attribute(slot)
        say(f"until_posted {slot}: {proc.where}")
        if proc.status != "paused":
            self._after(slot, proc)

    @precondition(lambda self: bool(self._paused()))
    @rule(who=st.integers(0, 3))
    def wake(self, who: int) -> None:
        slot = self._pick(who, self._paused())
        proc = self.running[slot]
        say(f"wake {slot} ({proc.name}) to its end")
        proc.resume(None)
        self._after(slot, proc)

    @precondition(lambda self: bool(self._paused()))
    @rule(who=st.integers(0, 3))
    def crash(self, who: int) -> None:
        slot = self._pick(who, self._paused())
        proc = self.running[slot]
        say(f"crash {slot} ({proc.name}) {proc.where}")
        proc.crash()
        self._after(slot, proc)

    @precondition(lambda self: bool(self._paused()))
    @rule(who=st.integers(0, 3))
    def renew(self, who: int) -> None:
        slot = self._pick(who, self._paused())
        say(f"renew {slot}'s leases (one beat)")
        self.w.renew(self.running[slot])

    @rule(seconds=st.sampled_from(["lease", 1.0, 5.0, 20.0, 70.0]))
    def time_passes(self, seconds: float | str) -> None:
        """Every clock moves on (``lease``: past every lease). Runners at work renew meanwhile; frozen ones do not."""
        if seconds == "lease":
            seconds = journal.lease_seconds() + journal.CLOCK_MARGIN + 1.0
            type(self).stats["expiries"] += 1
        say(f"time passes: every clock moves {seconds:g} s on")
        self.w.advance(float(seconds))

    @rule(
        # A store that drops a header is refused at once: seldom, it says nothing new after the first time.
        what=st.sampled_from(
            ["skew", "skew", "claim", "claim", "entry", "entry", "stop", "stop", "If-None-Match", "If-Match"]
        ),
        who=st.integers(0, 50),
        skew=st.sampled_from([0.0, -3600.0, -90.0, -4.0, 4.0, 90.0, 3600.0]),
        on=st.sampled_from(["ours", "theirs", "unknown"]),
    )
    def disturb(self, what: str, who: int, skew: float, on: str) -> None:
        """One of the world's disturbances (one rule, so that they do not crowd out the runners' steps)."""
        if what == "skew":
            self.skew(who, skew)
        elif what in ("If-None-Match", "If-Match"):
            self.drop_header(what)
        elif what == "claim":
            self.plant_claim(on, who)
        elif what == "entry":
            self.plant_entry(who)
        elif self.active():
            self.stop_object(who)

    def skew(self, who: int, seconds: float) -> None:
        slot = SLOTS[who % len(SLOTS)]
        say(f"skew: {slot}'s next processes run on a clock {seconds:+g} s off")
        self.skews[slot] = seconds

    def drop_header(self, header: str) -> None:
        """The store ignores a conditional header: a fresh process's create is refused at its first use of the
        journal, and writes and POSTs nothing. The fault is cleared after (a store that changes under processes
        that probed it already is not what the first-use check can see)."""
        say(f"drop_header: the store ignores {header}; a fresh process creates")
        store = self.w.store
        before, posts = store.contents(), len(self.objects())
        if header == "If-None-Match":
            store.ignore_if_none_match = True
        else:
            store.ignore_if_match = True
        proc = self.w.spawn(f"newcomer.{len(self.w.procs)}", OWNER, 0.0)
        try:
            proc.launch(None, False)
        finally:
            store.ignore_if_none_match = store.ignore_if_match = False
        assert proc.outcome is not None and proc.outcome[0] == "refused", proc.outcome
        assert "cannot be used" in proc.outcome[1] and "nothing was created" in proc.outcome[1], proc.outcome
        assert store.contents() == before, "a create refused at first use left something in the store"
        assert len(self.objects()) == posts, "a create refused at first use POSTed"
        type(self).stats["stores refused"] += 1

    def plant_claim(self, on: str, who: int) -> None:
        """A claim naming an entry that does not exist (a removed entry's, or garbage), on one of the declaration's
        objects, one of the colleague's, or an id nobody has: it proves nothing and must never be taken for proof."""
        active = self.active()
        ids = self.in_order(
            i for i in active if (self.ours(i) if on == "ours" else self.made.get(i) == "colleague")
        )
        ident = self._pick(who, ids) if ids and on != "unknown" else f"mr-planted-{uuid.uuid4().hex[:8]}"
        key = self.w.observer.journal.claim_key(self.w.base_url, ident)
        missing = f"entries/{self.request[:16]}/{uuid.uuid4().hex}.json"
        claim = Claim(entry=missing, owner="organization/test/gone/gpu", kind=MODEL_RESOURCE.name)
        if self.w.store.create(key, dump(claim)) is not None:
            self.planted_claims.add(ident)
            say(f"plant_claim on {ident} ({on}) naming the missing entry {missing}")

    def plant_entry(self, who: int) -> None:
        """An entry of this declaration (released, its POST answered) naming an object of the colleague's that the
        colleague's journal records and claims: a take-over of it must find it claimed first and take nothing.
        (An object its maker has not recorded yet cannot be defended against a forged entry: out of scope.)"""
        recorded = self.in_order(
            i
            for i in self.active()
            if self.made.get(i) == "colleague" and self._recorded_by(i, self.theirs_decl)
        )
        if not recorded:
            return
        ident = self._pick(who, recorded)
        sent = self.w.wall() - timedelta(seconds=1)
        entry = Entry(
            kind=MODEL_RESOURCE.name,
            base_url=self.w.base_url,
            body=BODY,
            owner=OWNER,
            backend=self.backend,
            started_at=sent,
            state=State.CREATED,
            snapshot=[],
            sends=[sent],
            answered_at=sent,
            clock_offset=0.0,
            id=ident,
            lease=Lease(holder=None, seconds=journal.lease_seconds(), beat=1),
        )
        key = journal.Journal.entry_key(self.request, uuid.uuid4().hex)
        assert self.w.store.create(key, dump(entry)) is not None
        self.planted_entries.add(key)
        say(f"plant_entry {key} naming the colleague's {ident}")

    def _recorded_by(self, ident: str, decl: str) -> bool:
        found = self.w.observer.journal.claim(self.w.base_url, ident)
        if found is None or found[0] is None:
            return False
        named = self.w.observer.journal.read(found[0].entry, warn=None)
        return named is not None and named.entry.id == ident and named.entry.key == decl

    def stop_object(self, who: int) -> None:
        """Someone stops an object (a user, or its idle timeout)."""
        ident = self._pick(who, self.in_order(self.active()))
        say(f"stop_object {ident} ({self.made.get(ident)})")
        httpx.post(
            f"{self.w.base_url}/v1/rl/model-resources/{ident}/stop",
            headers={"Authorization": f"Bearer {self.w.api_key}"},
            timeout=10,
        ).raise_for_status()
        self.w.moves += 1

    @precondition(lambda self: self.state_id is not None)
    @rule()
    def destroy(self) -> None:
        """``pulumi destroy``: the state's object stopped and dropped from the state (its done entry stays), so that
        the declaration's runners create again."""
        ident = self.state_id
        assert ident is not None
        say(f"destroy: {ident} stopped and dropped from the state")
        if ident in self.active():
            self.stop_object(self.in_order(self.active()).index(ident))
        self.state_id = None

    @precondition(lambda self: self.pending)
    @rule()
    def recover(self) -> None:
        self._recover()

    def _recover(self) -> bool:
        """``recover`` (the real plan and writes) on the model's stack state: a fresh process reads the stack's
        journal, refuses while a create of it is live, else reopens or notes entries and drops the pending create
        (the pinned CLI's ``--import-pending-creates`` records nothing). True: it ran."""
        alive = [p.name for slot, p in self.running.items() if slot in RUNNERS]
        if alive:
            # A `pulumi up` of the stack still runs, and holds the stack's lock: recover refuses (a young lock, or
            # one whose process runs), whatever the journal says (a create between its done and its answer holds
            # no lease).
            say(f"recover: refused, the stack's lock is held by {', '.join(alive)}")
            type(self).stats["recover refused"] += 1
            return False
        proc = self.w.spawn(f"recover.{len(self.w.procs)}", "recover", 0.0)
        proc.status = "ended"
        with self.w.acting(proc):
            proc.journal.probe()
            seen = proc.journal.entries(warn=None)
            found = recovery.plan(self._stack_state(), seen, proc.journal.location)
            if found.live:
                say(f"recover: refused, {len(found.live)} live lease(s)")
                type(self).stats["recover refused"] += 1
                return False
            for decision in found.decisions:
                say(f"recover: {decision.action.value} {decision.id}: {decision.why[:120]}")
                if decision.reopen is not None:
                    recovery._note(decision.reopen, State.CREATED)
                    reopened = proc.journal.read(decision.reopen.key, warn=None)
                    assert reopened is not None and reopened.entry.state == State.CREATED
                    assert reopened.entry.id == decision.id
                elif decision.mark is not None:
                    recovery._note(decision.mark)
            if found.refresh_args():
                self.pending = False
        type(self).stats["recovers"] += 1
        return True

    def _stack_state(self) -> Any:
        resources = []
        if self.state_id is not None:
            resources.append({"urn": URN, "type": RESOURCE_TYPE, "id": self.state_id, "custom": True})
        pending = []
        if self.pending:
            inputs = {"__provider": "gASVpickled", "base_model": MODEL, "owner": OWNER}
            pending.append(
                {
                    "type": "creating",
                    "resource": {"urn": URN, "type": RESOURCE_TYPE, "custom": True, "inputs": inputs},
                }
            )
        data = {"version": 3, "deployment": {"resources": resources, "pending_operations": pending}}
        return parse_state(json.dumps(data), "stack dev", name="organization/test/dev", backend=self.backend)

    # ------------------------------------------------------------------------------------ invariants

    @invariant()
    def no_silent_gpu(self) -> None:
        type(self).stats["steps"] += 1  # once before the first step too: the runner subtracts the examples
        seen = self.entries()
        for ident, obj in self.active().items():
            if self.ours(ident):
                assert self.accounted(ident, obj, seen), (
                    f"{ident}, made by {self.made[ident]}, is active and neither the state nor the journal names "
                    f"it: a silent GPU (entries: "
                    + "; ".join(f"{s.name}: {s.entry.owner} {s.entry.state.value} id={s.entry.id} "
                                f"window={s.entry.window()}" for s in seen)
                    + f"; created {obj['created_at']})"
                )  # fmt: skip

    @invariant()
    def nothing_of_anothers_taken(self) -> None:
        theirs = {i for i, m in self.made.items() if m == "colleague"}
        ours = {i for i, m in self.made.items() if m in RUNNERS}
        assert self.state_id not in theirs, f"the declaration's state holds the colleague's {self.state_id}"
        assert self.colleague_id not in ours, (
            f"the colleague's state holds the declaration's {self.colleague_id}"
        )
        for s in self.entries():
            if s.key in self.planted_entries or not s.entry.id:
                continue
            if s.entry.key == self.decl:
                assert s.entry.id not in theirs, (
                    f"entry {s.name} of the declaration records the colleague's {s.entry.id}"
                )
            if s.entry.key == self.theirs_decl:
                assert s.entry.id not in ours, (
                    f"the colleague's entry {s.name} records the declaration's {s.entry.id}"
                )

    @invariant()
    def no_live_lease_taken(self) -> None:
        history = self.w.store.history
        for written in history[self.history_seen :]:
            if written.op != "swap" or not written.key.startswith("entries/"):
                continue
            assert written.before is not None and written.after is not None
            before, after = parse_entry(written.before.data), parse_entry(written.after.data)
            if before.lease is None or before.lease.holder is None or after.lease is None:
                continue
            if after.lease.holder in (None, before.lease.holder):
                continue
            age = (written.after.modified - written.before.modified).total_seconds()
            type(self).stats["leases taken over"] += 1
            assert age >= before.lease.seconds, (
                f"{written.by} took over {written.key} {age:.1f} s after its holder's last write, within its "
                f"{before.lease.seconds:g} s lease"
            )
        self.history_seen = len(history)

    # ------------------------------------------------------------------------------------ convergence

    def teardown(self) -> None:
        # Hypothesis calls this from a `finally`: after a failed step the failure is in flight, and convergence is
        # not checked on top of it.
        try:
            if sys.exc_info()[0] is None:
                self.converge()
        finally:
            self.w.close()

    def converge(self) -> None:
        """See the module docstring."""
        say("converge: every paused runner dies, faults cleared, leases expire")
        for slot in list(self.running):
            proc = self.running[slot]
            proc.crash()
            self._after(slot, proc)
        self.skews = dict.fromkeys(SLOTS, 0.0)
        self.w.advance(journal.lease_seconds() + journal.CLOCK_MARGIN + 1.0)
        if self.pending:
            assert self._recover(), "recover refused with every runner dead and every lease expired"

        # A refusal that says to run `pulumi up` again is followed, as a user would, as long as each run gets further:
        # the journal must change between two such refusals (one that finds another's object recorded in an entry
        # of this declaration drops that entry's id, and there may be one such entry per planted one).
        def recorded() -> list[str]:
            return sorted(s.name for s in self.entries() if s.entry.key == self.decl and s.entry.id)

        attempts = 3 + len(recorded())
        for attempt in range(attempts):
            if not self._may_start("r0"):
                break
            before = set(self.objects_ids())
            recorded_before = recorded()
            proc = self._launch("r0", None, False)
            assert proc.outcome is not None
            what, detail = proc.outcome
            if what == "made":
                type(self).stats["converged"] += 1
                break
            assert what == "refused", proc.outcome
            assert set(self.objects_ids()) == before, f"a refused create made something: {detail}"
            if AGAIN in detail and attempt < attempts - 1:
                assert recorded() != recorded_before or "recorded it first" not in detail, (
                    f"a run again would find the same: {detail}"
                )
                continue
            reasons = self.ambiguity()
            assert reasons, f"the last create refused where nothing is ambiguous: {detail}"
            type(self).stats["converged to a real ambiguity"] += 1
            say(f"converge: refused, and rightly: {'; '.join(reasons)}")
            break
        active = self.active()
        if self.state_id is not None:
            assert self.state_id in active, f"the state holds {self.state_id}, which is not active"
        seen = self.entries()
        for ident, obj in active.items():
            if self.ours(ident) and ident != self.state_id:
                assert self.accounted(ident, obj, seen), f"{ident} bills and nothing names it"
                type(self).stats["a second object, named"] += 1

    def objects_ids(self) -> list[str]:
        return [o["id"] for o in self.objects()]

    def ambiguity(self) -> list[str]:
        """Why a match for the declaration's unanswered creates cannot be unique (empty: it can).

        A rival is any other entry (of any declaration, this one's included: the protocol's rule) with a POST window
        and no id, as :func:`~pulumi_together_rl.ownership.journal.rivals` reads them. One that a claim names is no
        excuse: a run that got its answer records the id in its entry before it writes the claim (the write order),
        so a claim naming an entry without an id is the very inconsistency that order exists to rule out."""
        active = self.active()
        seen = self.entries()
        claimed = {
            parse_claim(stored.data).entry
            for key, stored in self.w.store.contents().items()
            if key.startswith("claims/")
        }
        rivals = [s for s in seen if not s.entry.id and s.entry.window() and s.key not in claimed]
        reasons = []
        for s in seen:
            entry, window = s.entry, s.entry.window()
            if (
                entry.key != self.decl
                or entry.id
                or window is None
                or entry.state in ENDED
                or s.key in claimed
            ):
                continue
            inside = [
                i
                for i, o in active.items()
                if i not in (entry.snapshot or []) and _within(_created(o), window, entry.clock_offset)
            ]
            for i in inside:
                if not self.ours(i):
                    reasons.append(f"{i} ({self.made.get(i)}) in the window of {s.name}")
                if i in self.planted_claims:
                    reasons.append(f"{i} has a planted claim")
                for r in rivals:
                    if r.key == s.key:
                        continue
                    rw = r.entry.window()
                    assert rw is not None
                    if _within(_created(active[i]), rw, r.entry.clock_offset):
                        reasons.append(
                            f"{i} is in the window of another unanswered create, {r.name} ({r.entry.owner})"
                        )
            if len([i for i in inside if self.ours(i)]) > 1:
                reasons.append(f"{len(inside)} objects of the declaration in the window of {s.name}")
        return reasons


PROFILES = {
    "check": settings(max_examples=5, stateful_step_count=25, deadline=None),
    "release": settings(max_examples=30, stateful_step_count=30, deadline=None),
}


def run(world: World, profile: str) -> collections.Counter[str]:
    JournalMachine.world = world
    JournalMachine.stats = collections.Counter()
    started = time.monotonic()
    run_state_machine_as_test(
        JournalMachine,
        settings=settings(
            PROFILES[profile],
            database=DirectoryBasedExampleDatabase(EXAMPLES),
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            # No `explain` phase: its line tracing slows every step of a shrunk example tenfold.
            phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
        ),
    )
    stats = JournalMachine.stats
    stats["steps"] -= stats["examples"]
    stats["seconds"] = round(time.monotonic() - started)
    print(f"\njournal model ({profile}): " + ", ".join(f"{k} {v}" for k, v in sorted(stats.items())))
    return stats


@pytest.fixture
def world(emulator, emulator_server, monkeypatch) -> World:
    made = World(emulator, emulator_server, monkeypatch)
    yield made
    made.close()


def test_the_journal_protocol_holds_over_random_runs(world):
    stats = run(world, "check")
    assert stats["steps"] > 0 and stats["examples"] > 0


@pytest.mark.release
def test_the_journal_protocol_holds_over_long_random_runs(world):
    stats = run(world, "release")
    assert stats["steps"] > 0 and stats["examples"] > 0


# ---------------------------------------------------------------------------------------- shrunk failures, replayed
# Each is a sequence the model once failed on (shrunk), replayed step by step with every invariant after each step
# and the convergence at the end, as the machine runs it. They pass on the code as it is; each says what it caught.


def replay(world: World, *steps: tuple[str, dict[str, Any]]) -> JournalMachine:
    """Run ``steps`` (rule name, arguments) on a fresh machine, the invariants after each, then its teardown."""
    JournalMachine.world = world
    machine = JournalMachine()
    checks = [machine.no_silent_gpu, machine.nothing_of_anothers_taken, machine.no_live_lease_taken]
    for check in checks:
        check()
    for name, arguments in steps:
        getattr(machine, name)(**arguments)
        for check in checks:
            check()
    machine.teardown()
    return machine


def test_a_store_slow_to_take_the_entry_never_leaves_the_post_outside_its_window(world):
    """Found by the model (a real bug, fixed in ``CreateTransaction.sending``): the entry's create was stamped with
    its send, then the store took 70 s to take it, then the POST went out: the object was made after the window the
    entry records (send + POST_BOUND) had ended. A crash before the id was written left a GPU no record names, and
    the next create, finding nothing in that window, POSTed a second one."""
    replay(
        world,
        ("start", {"who": 0, "stop_at": 10, "linger": False}),  # r0 paused before write 6: its entry's create
        ("time_passes", {"seconds": 70.0}),  # the store answers 70 s later
        ("until_posted", {"who": 0}),  # the entry lands, the POST goes out and is answered
        ("crash", {"who": 0}),  # right before the id is written
    )


def test_a_claim_is_written_only_after_the_id_it_binds_is_in_its_entry(world):
    """The write order's point (found again by the model with the old order planted: the claim bound before the id
    was written). r0 is killed right after its entry landed, before its POST; r1 waits out that lease, takes the
    entry, finds nothing in its window, keeps it, POSTs its own inside that window and is killed right after its next
    write lands (in the old order: the claim, naming an entry without the id). The next create must take r1's object
    over, not refuse it as doubtful."""
    replay(
        world,
        ("start", {"who": 0, "stop_at": 11, "linger": False}),  # r0: after write 6, its entry's create
        ("crash", {"who": 0}),
        (
            "start",
            {"who": 1, "stop_at": 17, "linger": False},
        ),  # r1: take, keep, its own entry, then one write
        ("crash", {"who": 1}),
    )
