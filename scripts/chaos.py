"""A seeded fault campaign: many full stacks brought up and destroyed while the emulator misbehaves, on an
account a team shares.

Every cycle declares a stack: 1 model resource (``gpu``) and 1-3 LoRA training sessions (``trial-<i>``, LoRA rank
from {8, 16, 32}, a random display name). It is deployed through the provider exactly as ``pulumi up`` deploys it:
the Pulumi SDK's own dynamic-provider server in a subprocess (``python -m pulumi.dynamic``, a fresh one for every
command, as the CLI starts a fresh plugin per command), driven over gRPC by the suite's stand-in engine
(``harness/engine.py``): refresh (the examples' ``refresh: always``), then Check/Create of the resource,
then the sessions at once (the engine runs independent steps in parallel). Every resource carries the ``owner``
input the program's resource classes add (``-/chaos/<stack>/<name>``, as ``ModelResource.__init__`` computes it
without an organization): the create journal takes an object over only for the same declaration. The API key
reaches the provider only through Configure (a secret stack config value); the emulator checks it.

**One account, one user, several keys.** The emulator accepts a team's keys (setting ``api_keys``): every stack
of a cycle, the colleague and the out-of-band stopper get their own key of the SAME user, so that every key sees
every object as ``created_by=me`` (what the provider sees) while the emulator's control API records which key
made each object (``created_with`` in its state) and which key sent each request (``key`` in its request log),
as a digest. That is how the audits know who made and who stopped what; no API answer shows it.

What a cycle injects (a random mix, drawn from the cycle's own RNG; probabilities are per cycle):

* fault rules (``emulator/faults.py``), each with its own seeded ``probability`` and ``times``, for every key
  alike (the stacks', the colleague's) unless said otherwise:
  429 with and without ``Retry-After`` (anywhere, creates included); 500/502/503/504 and dropped connections on
  reads, lists and stops; latency (creates included); act-then-fail on creates (the object is made, the answer
  is a 5xx or a dropped connection) and on stops; a refused create that did not act (an answered 500/503);
  rarely (about 1 cycle in 25, each costing the create's 60 s settle window) an *unanswered* create that did
  not act (502/504/drop); a time-windowed outage of every endpoint (``duration`` 0.5-2 s, ``armed_by`` a
  create being accepted; 503 or 500, so the creates it catches are answered failures);
* act-then-5xx on session creates (about 1 cycle in 5, from an RNG of its own; every cycle with ``--focus
  session-act-then-5xx``, then firing on every session POST until its 1-3 times are spent, ahead of the drawn
  rules): the API makes the session, then answers its own 500 or 503 (the error envelope: an *answered*
  failure). The create looks once; ``client/reconcile.py``'s ``ANSWERED_LOOKALIKE_RULE`` takes the one session on
  the stack's own model resource made inside the POST's window (a model resource's look-alike would be named,
  never taken). ``session creates made, then answered 500/503`` counts them from the request log (any key's,
  the general act-then-fail rules and the colleague's in-flight one included);
* ERROR during provisioning (``fail-next`` for the next model resource or session);
* a create timeout: the resource (or the sessions) declare ``create_timeout: 1`` and provision for 2.5 s in
  the first try only (a long capacity queue), so that create fails and must stop what it made; the next try
  provisions at the cycle's own pace;
* settings: ``read_lag`` (GET/stop of a young object answers 404), ``list_lag`` (lists leave young objects
  out), ``stops_ignored`` (a stop answers 200 and does nothing; the provider re-stops after 15 s);
* poisoned lists (about 1 cycle in 5): unreadable raw items (a status that is a number, a ``created_at`` that
  is no time, a session without ``model_resources_id``) appended to every answer of one or both lists
  (``EmulatorControl.set_list_extras``), which every snapshot, lookup, wait and refresh reads;
* an out-of-band stop of one object of the first stack (a session, or the resource with ``force``), sent with
  a key of its own, between the first ``up`` and a second ``up``, which must recreate it;
* an interrupt: SIGKILL of the provider process mid-create, either while it waits for READY/RUNNING (the
  create journal holds the id) or while the create's POST is in flight (a 1 s injected latency: the journal
  has no id, the object appears after the provider died). The next ``up`` of the same stack (after the
  in-flight POST has landed, as a user re-running it would) must take the object over. In about 2 kill
  cycles in 5, that next ``up`` is itself killed while it takes the object over (once its "taking it over"
  line is out; the object provisions for 5 s so that it is still waiting), and a third ``up`` must take it over
  from the second one's journal entry;
* a zombie engine (about 1 kill cycle in 3): stack a's provider processes run under an engine process of their
  own (``harness.engine.ProviderUnderEngine``: the campaign -> the engine, named ``pulumi`` -> the provider), and
  the interrupt SIGKILLs that engine instead of the provider and never reaps it: it stays a zombie (state Z, its
  pid and start time unchanged) while the provider lives on, and the stand-in's RPCs end with it (no answer that
  arrives after the kill is read). The provider's lifeline must take the zombie for gone: exit on its own
  (within ``CHECK_EVERY + POST_GRACE`` + 10 s) while the engine is still a zombie, mark no create done after the
  kill, and leave its creates in flight with their ids and ``lifeline.GONE_NOTE`` for the next ``up``, which must
  take the objects over. The engine is reaped once the provider has exited. The killed kind provisions for 2 s
  (8 s with a kill during the take-over), so that the kill is not within the lifeline's half-second look of a
  create's end (a create that ends in that window answers a dead engine: the lifeline's documented limit); a kill
  during the take-over that follows hits the provider itself, for the same reason.

Team cases (a seeded share of the cycles, in the stand-in cycles and in the CLI cycles; the cross-backend and
zombie-engine cases are drawn from an RNG of their own, so that a cycle without them keeps its earlier plan):

* **two stacks, one request** (about 1 cycle in 4; 2 in 3 of the CLI cycles; unless cross-backend): a second
  stack (``c<N>b``: a second deployment, its own engine state, its own provider process for every command) declares
  exactly the same requests, shares the create journal folder (one machine), and runs concurrently (one thread
  driving each engine) under the same fault mix; about 1 two-stack cycle in 2 has a kill, which hits the first
  stack's provider only (its kill latency is a fault rule aimed at that stack's key), while the second
  proceeds;
* **a colleague** (about 1 cycle in 3; 3 in 5 CLI cycles): 1-2 look-alike objects POSTed by hand (raw HTTP
  with the colleague's own key): the same request as the declared resource or a declared session (copied from
  a create journal entry when one exists), at a random moment of the cycle, or while a create of that request
  is in flight (the stacks' POST then gets a 0.6 s latency, half of the time acting then failing with a 500, so
  that the stack's own lookup sees both objects; a rule aimed at the stacks' keys), or while it is interrupted
  (just after the kill). The same fault rules apply to his requests as to everyone's. The colleague stops
  his own sessions before the destroy, or (half of the cycles) only before its last try, so that the first
  destroy tries meet a session the stack does not manage on its resource;
* **twins** (about 1 single-stack cycle in 7): the stack declares two identical model resources (``gpu`` and
  ``gpu-twin``, created in parallel) and two identical sessions (``trial-0`` and ``trial-0-twin`` on ``gpu``),
  and is always interrupted (a kill during the POSTs holds both twins' POSTs in flight);
* **kill during a take-over**: above;
* **cross-backend** (about 1 stand-in cycle in 5; 1 CLI cycle in 2): two stacks with the same project, stack and
  resource names, so that their ``owner`` strings are equal, in two backends (each stack's provider processes get
  their own ``PULUMI_BACKEND_URL=file://<tmp>/backend-<cycle>-<role>``; through the CLI, each stack has its own
  file backend and the second runs in a checkout of its own), with their own keys, sharing the create journal
  folder (one machine). The first stack's first ``up`` runs (in about 3 cycles in 4 its provider is killed during
  the model resource's create, the one request both stacks make alike: a session names its stack's own model
  resource), then the second stack's whole up phase, then the first stack's re-runs. Neither may take the other's
  objects, even from an interrupted entry of the same owner: an entry belongs to its stack's backend too. The
  audits tell the stacks apart by the key that made each object and the state that holds it, never by name; the
  case is counted only when the journal shows entries of one owner from both stacks, each with its own backend.

Runner cases (``--runner-cycles K``: K more cycles after the others, runner cycle N being ``RUNNER_CASES[N % 3]``,
with the cycle's own fault mix and none of the other team cases): the stack's state and its create journal are in
a bucket of a loopback S3-compatible server (``harness.bucket.S3Server``, moto, one bucket per cycle), and each
command runs on a **runner**, a machine of its own: its own ``HOME``, XDG folders and ``TMPDIR``, no
``TOGETHER_RL_STATE_DIR`` and no ``TOGETHER_RL_JOURNAL_URL``, ``PULUMI_BACKEND_URL`` the bucket's, so that the
provider finds the journal beside the state as it does after a ``pulumi login`` of the bucket (the stand-in
engine keeps the state itself, as the bucket would; leases last 3 s instead of 30, to keep the campaign short):

* **a runner thrown away mid-create**: while the stack's first ``up`` waits for an object to be READY/RUNNING, or
  while its POST is in flight (1 s injected latency), the runner's provider process tree is SIGKILLed (frozen
  first) and its folders deleted; the next ``up`` runs on a new runner and must take the object over from the
  journal in the bucket (the stand-in's state holds nothing of the killed create: what ``recover`` leaves when the
  CLI cannot import a pending create);
* **a CI cancel**: the same moments, GitHub Actions' cancel at its real timing: SIGINT to the provider, SIGTERM
  7.5 s later if it still runs, SIGKILL of its tree 2.5 s after that, then the runner deleted; the next ``up``
  on a new runner;
* **two runners of one stack**: runner 1's ``up`` is frozen (SIGSTOP of its provider) once its model resource's
  create has recorded the id in the bucket and waits for READY; runner 2's up phase runs meanwhile (its create
  meets runner 1's lease, waits for it to run out, takes the object over); then runner 1 wakes up, a straggler
  whose lease was taken over: its create must fail, marking nothing done and stopping nothing; its state is
  then discarded with its runner, and runner 2 destroys the stack. Runner 1's state is audited with runner 2's
  (an id both hold is lost state; what only runner 1's holds bills after the destroy).

The audits are the same; the key-leak audit reads every object of the bucket too. ``runner cycles with the journal
beside the state`` counts the runner cycles whose bucket held the journal's entries afterwards; each case's figure
counts the cycles in which its interrupt came; ``stragglers that lost their lease`` the two-runner cycles whose
runner 1 failed saying so.

Deadline cases (about 1 in 4 of the stand-in cycles with one stack, no kill and no twins, from an RNG of their own;
every stand-in cycle with ``--focus deadline``, at one moment with ``--focus deadline-<moment>``; with
``--deadline-cycles K``, K more stand-in cycles after the others, deadline cycle N at moment
``DEADLINE_MOMENTS[N % 3]``, so that a campaign has every moment whatever its draw; never through the CLI, whose
example declares no deadline): every declared session has a ``stop_after``
(``resources/deadline.py``, docs/cost.md), and it passes

* **during a create**: a time :data:`DEADLINE_CREATE_AHEAD` (6 s) ahead of the sessions' first declaration, and a
  capacity queue (the sessions' provisioning time) of :data:`DEADLINE_QUEUE` for the first up phase: each create
  waits until the deadline, must stop what it made and record it stopped, and the ``up`` succeeds;
* **during an outage**: a time :data:`DEADLINE_OUTAGE_AHEAD` (10 s) ahead; once the sessions run, every endpoint
  answers 503 or 500 (every key) from before the deadline until 2 s or 12 s after it, an ``up`` begun past the
  deadline runs meanwhile (its client retries through the outage, or it fails: its note says which), then the up
  phase again: the sessions must be stopped, nothing duplicated;
* **during a refresh**: :data:`DEADLINE_DURATION` (``1m``), and the emulator's clock (the API's, on which a refresh
  judges) moves :data:`DEADLINE_ADVANCE` (90 s) ahead while this machine's (on which a diff judges: the campaign
  cannot move it) stays behind: a ``pulumi refresh`` (it must stop nothing), an out-of-band stop of one session,
  a ``refresh`` again (it must keep it in the state, stopped), then the up phase (it must not re-create it).

No create timeout, no out-of-band stop between two ups in those cycles (the refresh case has its own). The user
moves a time deadline when an error says it has passed (a create that reached it first: the check's and the
create's advice), and for the cleared phase (a new deployment after the destroy: a time that has passed is refused
at check). The audits take an object's deadline from the ``stop_after`` the stack declared when it was made and
the emulator's ``created_at``, never from the state. ``deadline cycles`` counts the cycles whose moment came as
planned (create: every session the state holds was stopped by the stack; outage: it began before the deadline
with the sessions running; refresh: the stopped session was still in the state after the ``up``), and by moment.

A failed ``up`` is run again (the user re-running ``pulumi up``), at most 3 tries in all, plus one for each
interrupt the campaign caused and each journal entry the user dismissed. A create that cannot tell its object
from look-alikes touches nothing and raises "none can be proven this create's", naming the command that
dismisses its journal entry if none is the stack's (or ``adopt_id`` if one is): the simulated user cannot tell
either and runs ``python -m pulumi_together_rl journal dismiss <entry>``, then ``up`` again, which makes a new
object (the dismissed entry stays a rival to every other create); the objects that error named and that this
stack's key made are "left for the user to decide" (below). After the final ``up``
(and, with an out-of-band stop, after the second ``up``'s tries) comes ``destroy``, at most 3 tries, with every
fault rule, list poison and lag setting cleared before the last one so the cleanup can finish (a ``fail-next`` no
object used is spent then too, on an object of the out-of-band key's own: the emulator cannot disarm one). Then
the **cleared phase**: with every fault cleared, each stack runs one ``up`` and one ``destroy``, no retry and no
command of the user's in between (no ``journal dismiss``, no ``adopt_id``): what the faulty phase left (a journal
entry, an object no state holds, a session on the stack's model resource) must not keep a stack from being
brought up and torn down again on its own. The emulator is reset between cycles; the create journal
(``TOGETHER_RL_STATE_DIR``) lives in the campaign's own temporary folder for the whole campaign, as a user's
would.

Audits (against the emulator's control API, which is never faulted, and the engines' states; never what the
provider says). An audit point is the end of an up phase (every stack's, the stacks joined) and of the cleared
phase's ``up``, plus, for the "taken" audit, the end of every ``up`` command of a stack:

* **orphans**: at each audit point, an active object (resource PENDING/CREATING/READY, session
  CREATING/RUNNING) whose id no stack's state holds, apart from the colleague's own objects and those left for
  the user to decide. Counted once per object.
* **left for the user to decide** (reported, not a failure): an active object that no state holds, named as a
  candidate in a "none can be proven this create's" error whose journal entry the user then dismissed, and made by
  that stack's own key. The user could not tell it apart from the look-alikes either; it still bills until the
  user decides (``python -m pulumi_together_rl orphans`` lists it). A stack's model resource whose destroy is
  refused because such a session is attached to it (the provider never stops sessions it does not manage)
  waits for that decision too and is counted here, not as billed. The user makes it when a ``destroy`` try
  fails so: the error names the attached sessions and says to stop them first; the user asks the team, nobody
  claims the one the stack's own key made (the colleague claims and stops his own), and the user stops it with
  the stack's key before the next try (not a healthy object stopped: it was left for the user to decide). So is an object such an error named on the
  stack's last try (no try was left for the user to dismiss it) while the create journal still records that
  declaration's unanswered create: ``journal list`` shows it, and the next ``up`` asks the same question.
  Counted once per object.
* **duplicates**: per stack (by the key that made each object) and per declared request, no more objects were
  ever active at the same time than the stack declares of that request (the resource: 1, or 2 with twins; a
  session: by display name, 1, or 2 for a twin; a session of that stack's key matching no declared display name
  counts as a duplicate). An object is active from its ``created_at`` to the moment it left the active
  statuses, which the emulator's timestamps give (``updated_at`` of STOPPING/ERROR/EXPIRED; for STOPPED,
  ``updated_at`` minus the longest stopping time that can precede it, a lower bound). An object made while its
  stack already had as many of its request active counts once (``stops_ignored`` can keep a "stopped" one
  active: that is what it probes); the objects the user chose to leave (named by an error whose journal entry the
  user dismissed) are not counted: the new object is what that choice asked for, and the old one is in its own
  figure (or, if another stack then held it, in "taken").
  Overlaps shorter than the stopping time (< 0.3 s) can be missed, never invented.
* **taken from another owner**: at any audit point, an id held in a stack's state (or pending delete) whose
  object was made by another key: another stack's POST (cross-backend: the other stack of the very same owner),
  or the colleague's. Counted once per stack and object.
* **taken, indistinguishable from the stack's own** (reported, not a failure): the one case of the above that
  the provider's documented limit (``client/reconcile.py``: "a match is evidence, not proof") admits, checked
  from the request log: another key's create with the very same request body made the object after the stack's
  last list before its POST and before that POST arrived, and the stack's POST failed without acting. Both keys
  are the same user, the API takes no idempotency key, and nothing it answers tells the two creates apart.
* **healthy objects stopped**: a stop request (``POST .../stop`` in the emulator's request log, whether or not
  it acted) on an object, counted once per object, when (a) its key is not the key whose create made the object
  (another stack's, or the colleague's; the out-of-band stopper's key is the injected fault itself and is left
  out), or (b) its key is the maker's stack's and it arrived during a ``pulumi refresh`` of that stack (a refresh
  stops nothing, past a deadline or not), or (c) its key is the maker's and the maker is a stack, and nothing
  explains it: its deadline had passed (the API's clock) when it arrived (a create's wait or an ``up`` stopped
  it at its deadline), or neither a change of
  that stack (the stop arrived while that stack's engine was deleting that very id: a destroy, a replacement, a
  removed resource; for the CLI, during a ``pulumi destroy`` of a state holding it, or during an ``up`` after
  which the state no longer holds it), nor an injected fault on that very object (it is in ERROR: a fail-next,
  on it or on its model resource; its create timed out: the create-timeout fault; it or its model resource had
  been stopped out of band before). Every other failure (an unreadable item in a list, an outage, a
  look-alike, a kill of another create) must never get a healthy object stopped.
* **lost state**: after each up phase, a state entry whose id the emulator does not know, whose object is
  not active (the ``up``'s refresh should have dropped it; apart from one whose deadline has passed on the API's
  clock, which the state keeps, stopped), or whose id another entry (of any stack) also holds; and, after a converged ``up``, a declared resource missing from the state. Counted once per entry.
* **commands still failing after faults cleared**: every command that began once every fault had been cleared
  (the destroy phase's last try, the cleared phase's ``up`` and ``destroy``) and failed all the same. Counted once
  per command; ``commands run after faults cleared`` counts those that ran, and ``..., waiting for what was left
  for the user`` those of them whose error names an object left for the user to decide (a session of the stack's
  own key on its model resource, whose destroy the provider then refuses): counted all the same.
* **billed after destroy**: active objects made by a stack's key after the last ``destroy`` try, read after the
  destroy phase and again after the cleared phase's ``destroy`` (the colleague's own and those left for the user
  are not the stacks' to destroy). Counted once per object.
* **key leaks**: any of the campaign's keys (every stack's, the colleague's, the out-of-band stopper's) in an
  engine state (JSON dump), a provider process's stdout/stderr, the emulator's request log (bodies, paths,
  queries), the create journal's files, or any error message seen (CLI cycles: ``pulumi stack export`` and the
  CLI's output). Counted once per place per cycle.
* **engine deaths unnoticed**: after a zombie-engine kill, the provider still running ``CHECK_EVERY +
  POST_GRACE`` + 10 s later (then the campaign kills it), or a create journal entry of that provider marked done
  after the kill whose id no state holds (its answer reached nobody, and the next ``up`` cannot take it over).
  Counted once per provider and per entry. (``zombie engines seen gone`` counts the kills after which the
  provider exited on its own while the engine was still a zombie; ``taken over after a zombie engine``, the ids
  it left with ``GONE_NOTE`` that a later ``up`` of that stack then held.)
* **ran past its deadline** (deadline cycles): after an ``up`` that succeeded, a session the stack's key made
  (held or not) still CREATING or RUNNING although its deadline had passed, on both clocks, :data:`DEADLINE_BOUND`
  (2 s) before the ``up`` began (its diff must have seen it due and its update stopped it), or although that
  ``up`` created it in the create case's queue (it could not be RUNNING by its deadline) and ended 2 s past it
  (the create's wait must have stopped it); apart from those left for the user to decide (no state holds them,
  and so no deadline of theirs: the user decides). What only the API's clock has passed (the refresh case moves it) no
  diff can see (docs/cost.md, "Which clock"): not judged. Counted once per object.
* **re-created after its deadline** (deadline cycles): before the destroy phase, an object of the stack's key made
  for a declared session once an earlier object of that declaration had reached its deadline still active (stopped
  at it, or past it), while the stack declared the same ``stop_after`` for both (the deadline did not move).
  Counted once per object.

``faults injected`` is the sum of ``fired`` over every rule, plus what the script counts itself: each
fail-next that landed an object in ERROR, each create that timed out, each 404 that read_lag caused (a 404
without a fault for an object the emulator knows), 1 per cycle in which list_lag was set and a list was made,
each ignored stop, each out-of-band stop, each kill (a kill during a take-over included), 1 per poisoned list
that was read. ``failed operations`` counts the ups and destroys that raised (each try). The team cases that
ran are counted too: ``two stack cycles``, ``two stack cycles with a kill`` (the kill came; both: one backend),
``cross-backend cycles`` (and ``with a kill``), ``colleague look-alikes`` (objects the colleague's key made),
``twin cycles with a kill``, ``kills during a take-over``, ``zombie engine kills`` (and the two figures above);
before them, one line per new case names the cycles that had it.

With ``--cli-cycles K``, K more cycles run through the real Pulumi CLI (``harness/cli.py``,
``examples/sweep`` with config ``sessions``, ``loraRanks``, ``namePrefix``; a second stack of it for two stacks):
the same faults, team cases and audits, except the kill (and so the zombie engine), the twins and the create
timeout (the example declares no ``create_timeout``).

Run it (deterministic given the seed, apart from thread timing):

    uv run --frozen python scripts/chaos.py --cycles 50 --seed 1             # or: make chaos
    uv run --frozen python scripts/chaos.py --cycles 50 --seed 1 --cli-cycles 2 --verbose
    uv run --frozen python scripts/chaos.py --seed 1 --first-cycle 17 --cycles 1 --verbose   # replay cycle 17
    uv run --frozen python scripts/chaos.py --seed 1 --cycles 0 --runner-cycles 3   # the three runner cases
    uv run --frozen python scripts/chaos.py --seed 1 --cycles 50 --dry-run   # print the plans only
    uv run --frozen python scripts/chaos.py --seed 7 --cycles 12 --focus session-act-then-5xx   # in every cycle
    uv run --frozen python scripts/chaos.py --seed 7 --cycles 8 --focus deadline   # a deadline case in every cycle
    uv run --frozen python scripts/chaos.py --seed 1 --cycles 0 --deadline-cycles 3   # each deadline moment once
    uv run --frozen python scripts/chaos.py --seed 1 --cycles 50 --evidence /tmp/chaos-evidence  # keep what
        # a cycle with a finding saw: provider/CLI output, errors, the emulator's final state and request log

The last lines are the figures: ``cycles``, ``faults injected``, ``failed operations``, the team cases, the
runner cases, ``left for the user to decide``, then ``orphans``, ``duplicates``, ``taken from another owner``,
``healthy objects stopped``, ``billed after destroy``, ``lost state``, ``key leaks``, ``engine deaths unnoticed``,
``commands still failing after faults cleared``, ``ran past its deadline``, ``re-created after its deadline``; the
exit status is 1 when any of the last eleven is not 0, and
every finding is described on stderr with the cycle that replays it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent

from harness.bucket import Bucket, S3Server  # noqa: E402
from harness.engine import (  # noqa: E402
    EngineError,
    ProviderProcess,
    ProviderUnderEngine,
    StandInEngine,
    provider_blob,
    sigint_as_the_engine_leaves_it,
)
from harness.runner import (  # noqa: E402
    GITHUB_SIGKILL_AFTER,
    GITHUB_SIGTERM_AFTER,
    descendants,
    kill_frozen,
    machine_folders,
)

from pulumi_together_rl import backend, lifeline  # noqa: E402
from pulumi_together_rl.client import TogetherRL  # noqa: E402
from pulumi_together_rl.emulator.control import EmulatorControl  # noqa: E402
from pulumi_together_rl.emulator.server import EmulatorServer  # noqa: E402
from pulumi_together_rl.emulator.settings import key_digest  # noqa: E402
from pulumi_together_rl.ownership import journal, location  # noqa: E402
from pulumi_together_rl.ownership.journal import Seen  # noqa: E402
from pulumi_together_rl.ownership.records import Entry, State  # noqa: E402
from pulumi_together_rl.resources.model_resource import _ModelResourceProvider  # noqa: E402
from pulumi_together_rl.resources.training_session import _TrainingSessionProvider  # noqa: E402

MR = "pulumi-python:dynamic/together:ModelResource"
TS = "pulumi-python:dynamic/together:TrainingSession"
PROJECT = "chaos"
MODEL = "Qwen/Qwen3.5-4B"
SWEEP = ROOT / "examples" / "sweep"


def _key(role: str) -> tuple[str, str]:
    """(key, its distinctive core): finding the core anywhere is unambiguous; the emulator refuses other keys."""
    core = hashlib.sha256(f"together-rl-chaos-key:{role}".encode()).hexdigest()[:20]
    return f"tk-chaos-{core}-{role}-never-shown", core


# One user, one key per member: the stacks of a cycle ("a", "b"), the colleague, the out-of-band stopper.
ROLES = ("a", "b", "colleague", "oob")
KEYS = {role: _key(role)[0] for role in ROLES}
KEY_CORES = {role: _key(role)[1] for role in ROLES}
DIGESTS = {role: key_digest(KEYS[role]) for role in ROLES}
WHO = {DIGESTS[role]: role for role in ROLES}

RESOURCES = "/v1/rl/model-resources"
SESSIONS = "/v1/rl/training-sessions"
ANY_PATH = r"^/v1/"
CREATES = r"^/v1/rl/(model-resources|training-sessions)$"  # POST: create; GET: list
OBJECTS = r"^/v1/rl/(model-resources|training-sessions)/[^/]+$"
STOPS = r"^/v1/rl/(model-resources|training-sessions)/[^/]+/stop$"
SUPPORTED = r"^/v1/rl/supported-models$"
STOP_PATH = re.compile(r"^/v1/rl/(model-resources|training-sessions)/([^/]+)/stop$")
RESOURCE_BODY = {"base_model": MODEL, "lora_enabled": True, "compute_config": {"num_generator_replicas": 1}}
COLLECTION = {"resource": "model-resources", "session": "training-sessions"}

RESOURCE_ACTIVE = ("PENDING", "CREATING", "READY")
SESSION_ACTIVE = ("CREATING", "RUNNING")
TIMING_KEYS = (
    "resource_pending",
    "resource_creating",
    "resource_stopping",
    "session_creating",
    "session_stopping",
)
EMULATOR_KIND = {"resource": "model_resource", "session": "training_session"}
JOURNAL_KIND = {"resource": "model resource", "session": "training session"}
RESOURCE_CODES = (
    "MODEL_RESOURCES_ERROR_CODE_CAPACITY_WAIT_TIMEOUT",
    "MODEL_RESOURCES_ERROR_CODE_PROVISIONING_FAILED",
    "MODEL_RESOURCES_ERROR_CODE_RESOURCE_UNAVAILABLE",
)
SESSION_CODES = (
    "TRAINING_SESSION_ERROR_CODE_RESOURCE_AT_CAPACITY",
    "TRAINING_SESSION_ERROR_CODE_TIMED_OUT",
    "TRAINING_SESSION_ERROR_CODE_SESSION_FAILED",
)
WORDS = "otter heron lynx ibis marten wren bison gecko koi tern puffin vole".split()
TRIES = 3  # tries of an up phase and of destroy (the first one included)
EXTRA_TRIES = 4  # at most this many more tries of an up: one per interrupt and per entry dismissed
KILL_LATENCY = 1.0  # the in-flight POST an interrupt lands in
KILL_WAIT_TIMING = 0.8  # provisioning time of the object whose wait an interrupt lands in
TAKEOVER_TIMING = 5.0  # provisioning time of the killed kind when the take-over is killed too
COLLEAGUE_LATENCY = 0.6  # the in-flight POST a colleague's look-alike lands in
SLOW_TIMEOUT = 1.0  # the declared create_timeout of the kind a create-timeout fault slows down
# Provisioning time of the kind whose create a zombie-engine kill lands in: the lifeline looks at the engine every
# CHECK_EVERY (0.5 s), so a create that ends sooner after the kill answers a dead engine (its documented window).
ZOMBIE_TIMING = 2.0
# ... and with a kill during the take-over: the next up starts only once the provider has seen its zombie engine
# and exited, so the object must still be waiting later than after a plain kill (TAKEOVER_TIMING).
ZOMBIE_TAKEOVER_TIMING = 8.0
# How long a provider whose engine is a zombie may take to exit on its own: one look, plus the POSTs in flight.
ENGINE_EXIT_BOUND = lifeline.CHECK_EVERY + lifeline.POST_GRACE + 10.0
SLOW_TIMING = 2.5  # its provisioning time in the first try (then back to the cycle's own)
RUNNER_LEASE = (
    3.0  # TOGETHER_RL_LEASE_SECONDS of the runner cycles (default 30 s): a killed runner blocks 5 s
)
PAUSE_TIMING = (
    3.0  # the model resource's provisioning time while runner 1 is frozen (two runners of one stack)
)
# The deadline cases (``Plan.deadline``): every declared session of the stack has a ``stop_after``.
DEADLINE_MOMENTS = ("create", "outage", "refresh")
DEADLINE_SHARE = 0.25  # of the stand-in cycles with one stack, no kill and no twins (about 1 cycle in 11)
# create / outage: an RFC 3339 time this far ahead of the sessions' first registration (a duration is at least a
# minute, and the diff judges on this machine's clock, which the campaign cannot move: real seconds pass).
DEADLINE_CREATE_AHEAD = 6.0  # the check and the POST fit in it; the create's wait runs out the rest
DEADLINE_OUTAGE_AHEAD = 10.0  # the sessions get RUNNING before it, then an outage covers it
# The outage lasts this long past the deadline: within one read's retries (5 tries, full-jitter backoff, at most
# 7.5 s), or past them (the up run meanwhile may then fail; its reads, each retried, can still outlast it).
DEADLINE_OUTAGE_TAILS = (2.0, 12.0)
DEADLINE_QUEUE = 600.0  # create: the sessions' provisioning time (a capacity queue longer than the deadline)
# refresh: a duration from the creation (the shortest allowed), passed by moving the emulator's clock (the API's:
# what a refresh judges on) this far; this machine's clock stays behind, so no diff sees it due.
DEADLINE_DURATION = "1m"
DEADLINE_ADVANCE = 90.0
# An object whose deadline passed this long before an `up` began (both clocks), or whose create waited at it and
# whose `up` ended this long after it, must be stopped by then (ran past its deadline): the state's stop_at is
# whole seconds, and the API's clock is read from a Date header of whole seconds.
DEADLINE_BOUND = 2.0
PASSED = re.compile(r"stop_after has passed|its deadline, stop_after \S+, has passed")


@dataclasses.dataclass(frozen=True)
class RunnerCase:
    """A runner case: what happens to the machine (a CI runner) running the stack's first ``up``, its state and
    its create journal in a bucket. ``interrupt``: "throw-away" (its provider's process tree SIGKILLed, its
    folders deleted), "github-cancel" (GitHub Actions' cancel of the step, then the runner deleted) or "pause"
    (frozen while another runner of the same stack runs ``up``, then woken); ``lands``: in what the interrupt
    lands ("wait": the create waits for READY / RUNNING, its id recorded; "post": its POST is in flight)."""

    name: str  # the figure
    label: str  # the plan's label
    interrupt: str
    lands: tuple[str, ...]


RUNNER_CASES = (
    RunnerCase("runners thrown away mid-create", "runner-thrown-away", "throw-away", ("wait", "post")),
    RunnerCase("runners cancelled mid-create", "runner-github-cancel", "github-cancel", ("wait", "post")),
    RunnerCase("two runners of one stack", "two-runners", "pause", ("wait",)),
)
"""Runner cycle N is case ``N % 3`` (so that ``--first-cycle N --cycles 0 --runner-cycles 1`` replays it)."""
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
DISMISS = re.compile(r"journal dismiss\s+([0-9a-f]+)")
ATTACHED = re.compile(r"training sessions that this stack does not manage are attached: (.*?) \(made outside")
CANDIDATES = re.compile(
    r"match(?:es)? it \((.*?)\), (?:but another create|but the API itself answered|so none can be proven)",
    re.S,
)
TIMED_OUT = re.compile(
    rf"creating (?:model resource|training session) \(({UUID.pattern})\): timed out after \d"
)


def short(status: str) -> str:
    """``MODEL_RESOURCES_STATUS_READY`` -> ``READY``."""
    return status.rsplit("_", 1)[-1]


def active_resource(obj: dict[str, Any]) -> bool:
    return short(obj["status"]) in RESOURCE_ACTIVE


def active_session(obj: dict[str, Any]) -> bool:
    return short(obj["status"]) in SESSION_ACTIVE


def active(obj: dict[str, Any]) -> bool:
    return active_resource(obj) if "lora_enabled" in obj else active_session(obj)


def kind_of(obj: dict[str, Any]) -> str:
    return "model resource" if "lora_enabled" in obj else "training session"


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def rfc3339(at: datetime) -> str:
    """A time as a user writes a ``stop_after`` (whole seconds, UTC)."""
    return at.astimezone(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def journal_entries(since: float) -> list[Seen]:
    """The create journal's entries written since ``since`` (a time.time()), oldest first (the store's clock of
    their last write): the campaign's journal keeps every cycle's records, and the watchers poll it often.

    Read through the journal's own reader (:meth:`Journal.read`, :meth:`Journal.entries`: the same parse, the same
    trust rules as the provider's), never by hand. A runner cycle's journal is the cycle's own bucket (a few
    entries: listed whole). The campaign's folder holds every cycle's entries, and listing it reads every one:
    only the files whose ``mtime`` is recent are read, as the old reader did, so that the watchers stay cheap."""
    url = os.environ.get(location.ENV_URL) or None
    opened = journal.at(url)
    if url is not None:  # a runner cycle: the journal in the cycle's bucket (store time, 1 s resolution)
        try:
            listed = opened.entries(warn=None)
        except journal.Refused:
            return []
        return [s for s in listed if s.modified.timestamp() >= since - 2]
    keys = []
    try:
        with os.scandir(journal.directory() / "entries") as requests:
            for request in requests:
                if not request.is_dir(follow_symlinks=False):
                    continue
                with os.scandir(request.path) as names:
                    keys += [
                        f"entries/{request.name}/{n.name}"
                        for n in names
                        if n.name.endswith(".json") and n.stat().st_mtime >= since
                    ]
    except OSError:  # no entry yet, or a folder removed meanwhile
        pass
    found = [s for s in (opened.read(key, warn=None) for key in keys) if s is not None]
    return sorted(found, key=lambda s: (s.modified, s.key))


def who(digest: str | None) -> str:
    role = WHO.get(digest or "")
    if role in ("a", "b"):
        return f"stack {role}'s key"
    return {"colleague": "the colleague's key", "oob": "the out-of-band stopper's key"}.get(
        role or "", f"an unknown key ({digest})"
    )


# ------------------------------------------------------------------------------------------------- plans


@dataclasses.dataclass
class Plan:
    """Everything one cycle declares and injects, drawn from ``random.Random(f"...:{seed}:{cycle}")``."""

    seed: int
    cycle: int
    cli: bool
    sessions: list[tuple[str, str, int]]  # (Pulumi name, display name, LoRA rank)
    prefix: str
    timings: dict[str, float]
    rules: list[tuple[str, dict[str, Any]]]  # (label, fault rule)
    settings: dict[str, Any]
    fail_next: list[tuple[str, str]]  # (emulator kind, error code)
    oob_stop: str | None  # "session" | "resource"
    oob_index: int
    kill: tuple[str, str] | None  # ("resource" | "session", "wait" | "post")
    kill_delay: float
    slow: str | None = None  # "resource" | "session": provisions past its create_timeout in the first try
    slow_restore: float = 0.0  # that kind's provisioning time from the second try on
    stacks: int = 1  # 2: two stacks, one request
    twins: bool = False  # gpu-twin and trial-0-twin, identical to gpu and trial-0
    takeover_kill: bool = False  # the up after the kill is killed while it takes the object over
    takeover_delay: float = 0.0
    # The colleague's look-alikes: (kind, trigger, delay).
    colleague: list[tuple[str, str, float]] = dataclasses.field(default_factory=list)
    colleague_late: bool = False  # the colleague stops his sessions only before the last destroy try
    poison: dict[str, list[Any]] = dataclasses.field(default_factory=dict)  # collection -> raw items
    backends: bool = False  # two stacks of the same names (equal owners) in two backends: cross-backend
    zombie: bool = False  # the kill hits stack a's engine, which is left unreaped: a zombie engine
    runner: RunnerCase | None = None  # a runner cycle: state and journal in a bucket, runners as machines
    deadline: str | None = None  # one of DEADLINE_MOMENTS: the sessions' stop_after passes at that moment
    deadline_restore: float = 0.0  # create: the sessions' provisioning time once the first up phase is over
    outage_status: int = 503  # outage: what the API answers while it is down
    outage_tail: float = DEADLINE_OUTAGE_TAILS[0]  # outage: how long it lasts past the deadline

    @property
    def message(self) -> str:
        return f"chaos seed {self.seed} cycle {self.cycle}: injected ERROR"

    def labels(self) -> list[str]:
        out = [label for label, _ in self.rules]
        out += [f"error-{kind.split('_')[-1]}" for kind, _ in self.fail_next]
        out += [f"{key}={value:g}" for key, value in self.settings.items()]
        out += [f"poison-{collection}" for collection in self.poison]
        if self.oob_stop:
            out.append(f"oob-stop-{self.oob_stop}")
        if self.kill:
            out.append(f"kill-{self.kill[0]}-{self.kill[1]}")
        if self.takeover_kill:
            out.append("kill-takeover")
        if self.slow:
            out.append(f"create-timeout-{self.slow}")
        if self.backends:
            out.append("cross-backend")
        elif self.stacks == 2:
            out.append("two-stacks")
        if self.zombie:
            out.append("zombie-engine")
        if self.runner is not None:
            out.append(self.runner.label)
        if self.twins:
            out.append("twins")
        if self.deadline == "outage":
            out.append(f"deadline-outage-{self.outage_status}-{self.outage_tail:g}s")
        elif self.deadline:
            out.append(f"deadline-{self.deadline}")
        out += [f"colleague-{kind}-{trigger}" for kind, trigger, _ in self.colleague]
        return out

    @property
    def slow_key(self) -> str:
        return "resource_pending" if self.slow == "resource" else "session_creating"

    def resource_names(self) -> list[str]:
        if self.cli:
            return ["sweep-gpu"]
        return ["gpu", "gpu-twin"] if self.twins else ["gpu"]

    def declared_sessions(self) -> list[tuple[str, str, int]]:
        """Every session declared: the twin of ``trial-0`` (same display name and rank, on ``gpu``) included."""
        if not self.twins:
            return list(self.sessions)
        name, display, rank = self.sessions[0]
        return [*self.sessions, (f"{name}-twin", display, rank)]


def unreadable_items(collection: str, rng: random.Random) -> list[Any]:
    """Raw items no client can read (fresh ids: the provider warns once per id)."""
    tag = f"{rng.randrange(16**12):012x}"
    if collection == "model-resources":
        template = {
            "id": f"mr-unreadable-a{tag}",
            "status": "MODEL_RESOURCES_STATUS_READY",
            "status_details": {},
            "base_model": MODEL,
            "compute_config": {"num_generator_replicas": 1, "gpu_type": "B200-SXM"},
            "lora_enabled": True,
            "optimizer_config": {"adam": {}},
            "inactive_timeout": 3600,
            "created_by": "user_emulator",
        }
        return [
            {
                **template,
                "status": 7,
                "created_at": "2024-01-01T00:00:00Z",
                "updated_at": "2024-01-01T00:00:00Z",
            },
            {**template, "id": f"mr-unreadable-b{tag}", "updated_at": "2024-01-01T00:00:00Z"},  # no time
        ][: rng.randint(1, 2)]
    return [
        {
            "id": f"ts-unreadable-a{tag}",
            "status": "TRAINING_SESSION_STATUS_RUNNING",
            "created_at": "not a time",
        },
        {"id": f"ts-unreadable-b{tag}", "status": 3, "model_resources_id": "nowhere"},
    ][: rng.randint(1, 2)]


FOCUSES = ("session-act-then-5xx", "deadline", *(f"deadline-{moment}" for moment in DEADLINE_MOMENTS))
"""What ``--focus`` can put in every cycle (see :func:`make_plan`): ``deadline`` a deadline case of a drawn
moment, ``deadline-<moment>`` that moment."""

SESSION_ACT_SHARE = 0.2
"""The share of cycles (beside the general act-then-fail creates above) whose session creates act then get the
API's own 500 or 503: the case :data:`client.reconcile.ANSWERED_LOOKALIKE_RULE` decides per kind (a session's
one look-alike in its POST's window is taken). ``--focus session-act-then-5xx`` puts it in every cycle."""


def make_plan(seed: int, cycle: int, *, cli: bool = False, focus: str | None = None) -> Plan:
    rng = random.Random(f"together-rl-chaos:{seed}:{cycle}")
    tag = f"{rng.randrange(16**6):06x}"
    count = rng.randint(1, 3)
    prefix = f"cx{tag}-{rng.choice(WORDS)}"
    if cli:  # examples/sweep names its sessions "<namePrefix>-<index>"
        sessions = [(f"trial-{i}", f"{prefix}-{i}", rng.choice((8, 16, 32))) for i in range(count)]
    else:
        sessions = [
            (f"trial-{i}", f"{prefix}-{rng.choice(WORDS)}-{i}", rng.choice((8, 16, 32))) for i in range(count)
        ]
    timings = {key: round(rng.uniform(0.05, 0.3), 3) for key in TIMING_KEYS}
    rules: list[tuple[str, dict[str, Any]]] = []

    def rule(label: str, **fields: Any) -> None:
        fields.setdefault("seed", rng.randrange(2**31))
        rules.append((label, fields))

    if rng.random() < 0.45:  # throttling, with and without Retry-After; creates included (nothing created)
        method, path = rng.choice([(None, ANY_PATH), ("POST", CREATES), ("GET", OBJECTS), ("POST", STOPS)])
        after = rng.choice([None, None, 0.1, 0.25, "ms"])
        extra: dict[str, Any] = {}
        if after == "ms":
            extra["retry_after_ms"] = 150
        elif after is not None:
            extra["retry_after"] = after
        label = "429" + ("" if after is None else "+retry-after")
        rule(
            label,
            method=method,
            path=path,
            status=429,
            times=rng.randint(2, 6),
            probability=round(rng.uniform(0.1, 0.35), 2),
            **extra,
        )
    if rng.random() < 0.45:  # server errors on reads, lists and stops
        status = rng.choice((500, 502, 503, 504))
        method, path = rng.choice(
            [("GET", ANY_PATH), ("GET", OBJECTS), ("GET", CREATES), ("POST", STOPS), ("GET", SUPPORTED)]
        )
        rule(
            str(status),
            method=method,
            path=path,
            status=status,
            times=rng.randint(1, 4),
            probability=round(rng.uniform(0.1, 0.3), 2),
        )
    if rng.random() < 0.3:  # the server hangs up before acting
        method, path = rng.choice([("GET", ANY_PATH), ("GET", OBJECTS), ("POST", STOPS)])
        rule(
            "drop",
            method=method,
            path=path,
            status=None,
            drop_connection=True,
            times=rng.randint(1, 3),
            probability=round(rng.uniform(0.1, 0.25), 2),
        )
    if rng.random() < 0.4:  # slowness, creates included
        rule(
            "latency",
            path=ANY_PATH,
            status=None,
            latency=round(rng.uniform(0.05, 0.4), 2),
            times=rng.randint(3, 10),
            probability=0.3,
        )
    if rng.random() < 0.35:  # the create acts, its answer is lost or an error: the duplicate-create hazard
        path = rng.choice([f"^{RESOURCES}$", f"^{SESSIONS}$", CREATES])
        if rng.random() < 0.3:
            rule(
                "act-then-drop-create",
                method="POST",
                path=path,
                status=None,
                drop_connection=True,
                act_then_fail=True,
                times=rng.randint(1, 2),
            )
        else:
            status = rng.choice((500, 502, 503, 504))
            rule(
                f"act-then-{status}-create",
                method="POST",
                path=path,
                status=status,
                act_then_fail=True,
                times=rng.randint(1, 2),
            )
    if rng.random() < 0.3:  # the stop acts, its answer is lost
        if rng.random() < 0.3:
            rule(
                "act-then-drop-stop",
                method="POST",
                path=STOPS,
                status=None,
                drop_connection=True,
                act_then_fail=True,
                times=rng.randint(1, 2),
            )
        else:
            status = rng.choice((500, 503, 504))
            rule(
                f"act-then-{status}-stop",
                method="POST",
                path=STOPS,
                status=status,
                act_then_fail=True,
                times=rng.randint(1, 2),
            )
    if rng.random() < 0.15:  # a create refused without acting, answered by the server itself
        status = rng.choice((500, 503))
        rule(f"refused-{status}-create", method="POST", path=CREATES, status=status, times=1)
    if rng.random() < 0.04:  # a create that got no answer and did not act (costs the 60 s settle window)
        how = rng.choice((502, 504, "drop"))
        if how == "drop":
            rule(
                "unanswered-drop-create",
                method="POST",
                path=CREATES,
                status=None,
                drop_connection=True,
                times=1,
            )
        else:
            rule(f"unanswered-{how}-create", method="POST", path=CREATES, status=how, times=1)
    if rng.random() < 0.25:  # every endpoint down for a moment from when a create is accepted
        armed = rng.choice((RESOURCES, SESSIONS))
        rule(
            "outage",
            path=ANY_PATH,
            status=rng.choice((503, 500)),
            times=None,
            duration=round(rng.uniform(0.5, 2.0), 2),
            armed_by=f"^POST {armed}$",
        )
    # The API makes the session, then answers its own 500/503 (the error envelope: an *answered* failure, which
    # a create looks for once and, for a session, takes). From an RNG of its own, so that a cycle without it keeps
    # the plan it had before it existed; for every key alike, as the rules above (the colleague's POSTs too).
    acts = random.Random(f"together-rl-chaos:{seed}:{cycle}:session-act-then-5xx")
    focused = focus == "session-act-then-5xx"
    if acts.random() < SESSION_ACT_SHARE or focused:
        status = acts.choice((500, 503))
        times, probability, rule_seed = (
            acts.randint(1, 3),
            round(acts.uniform(0.5, 1.0), 2),
            acts.randrange(2**31),
        )
        # Focused: every session create fires it until its times are spent (probability 1), and it comes before
        # the drawn rules (only the first rule that fires applies; the kill's and the colleague's rules, added
        # below, still come first), so that an act-then-502 or a 429 drawn for the same POST does not take its turn.
        rules.insert(  # not rule(): its seed would come from (and move) the cycle's own RNG
            0 if focused else len(rules),
            (
                f"session-act-then-{status}-create",
                {
                    "method": "POST",
                    "path": f"^{SESSIONS}$",
                    "status": status,
                    "act_then_fail": True,
                    "times": times,
                    "probability": 1.0 if focused else probability,
                    "seed": rule_seed,
                },
            ),
        )
    fail_next: list[tuple[str, str]] = []
    if rng.random() < 0.25:
        if rng.random() < 0.5:
            fail_next.append(("model_resource", rng.choice(RESOURCE_CODES)))
        else:
            fail_next.append(("training_session", rng.choice(SESSION_CODES)))
    settings: dict[str, Any] = {}
    if rng.random() < 0.2:
        settings["read_lag"] = round(rng.uniform(0.05, 0.3), 2)
    if rng.random() < 0.2:
        settings["list_lag"] = round(rng.uniform(0.2, 1.0), 2)
    if rng.random() < 0.1:
        settings["stops_ignored"] = 1
    oob_stop = None
    if rng.random() < 0.3:
        oob_stop = "resource" if rng.random() < 0.3 else "session"
    oob_index = rng.randrange(count)
    kill = None
    if not cli and rng.random() < 0.2:
        kill = (rng.choice(("resource", "session")), rng.choice(("wait", "post")))
    kill_delay = round(rng.uniform(0.0, 0.15), 3)

    # Team cases (drawn after the fault mix, so that they add to it). The cross-backend and zombie-engine cases
    # come from an RNG of their own: a cycle without them keeps the plan it had before they existed.
    cases = random.Random(f"together-rl-chaos:{seed}:{cycle}:backends-and-engines")
    stacks = 2 if rng.random() < (0.65 if cli else 0.25) else 1
    backends = cases.random() < (0.5 if cli else 0.2)
    if backends:
        stacks = 2
    if not cli and stacks == 2 and kill is None and rng.random() < 0.35:  # one of them interrupted
        kill = (rng.choice(("resource", "session")), rng.choice(("wait", "post")))
    if backends and not cli and kill is None and cases.random() < 0.5:  # more of them interrupted
        kill = ("resource", cases.choice(("wait", "post")))
    if backends and kill:
        # Only the model resource's request is the same in both stacks (a session's names its stack's own
        # resource): that is the create whose interrupted entry the other stack could take.
        kill = ("resource", kill[1])
    twins = not cli and stacks == 1 and rng.random() < 0.15
    if twins:
        sessions = sessions[:1]  # trial-0 and its twin on one resource, with room for look-alikes (cap 5)
        oob_index = 0
        if kill is None:  # twins are always interrupted
            kill = (rng.choice(("resource", "session")), rng.choice(("wait", "post")))
    # The deadline case, from an RNG of its own (a cycle without it keeps the plan it had before it existed): one
    # stack, no interrupt, no twins (their own cycles test those), never through the CLI (examples/sweep declares
    # no stop_after). Focused, it is in every stand-in cycle, and those cases give way to it.
    moments = random.Random(f"together-rl-chaos:{seed}:{cycle}:deadline")
    deadline_drawn, moment = moments.random() < DEADLINE_SHARE, moments.choice(DEADLINE_MOMENTS)
    deadline_focused = focus is not None and focus.startswith("deadline")
    if deadline_focused and focus != "deadline":
        moment = focus.split("-", 1)[1]
    deadline, deadline_restore = None, 0.0
    outage_status, outage_tail = moments.choice((503, 500)), moments.choice(DEADLINE_OUTAGE_TAILS)
    if not cli and (deadline_focused or (deadline_drawn and stacks == 1 and kill is None and not twins)):
        deadline = moment
        stacks, backends, kill, twins = 1, False, None, False
    # (Twins killed during their POSTs cannot be told apart: no take-over, nothing to kill during one.)
    takeover_kill = rng.random() < 0.4 and kill is not None and not (twins and kill[1] == "post")
    zombie = kill is not None and cases.random() < 0.35
    takeover_delay = round(rng.uniform(0.0, 0.3), 3)
    colleague: list[tuple[str, str, float]] = []
    if rng.random() < (0.6 if cli else 0.35):
        for _ in range(1 if twins else rng.randint(1, 2)):
            trigger = rng.choice(("random", "inflight", *(("interrupted",) if kill else ())))
            kind = kill[0] if trigger == "interrupted" and kill else rng.choice(("resource", "session"))
            colleague.append((kind, trigger, round(rng.uniform(0.3, 6.0), 2)))
    colleague_late = rng.random() < 0.5
    poison: dict[str, list[Any]] = {}
    if rng.random() < 0.2:
        for collection in rng.sample(("model-resources", "training-sessions"), rng.randint(1, 2)):
            poison[collection] = unreadable_items(collection, rng)
    inflight_act = rng.random() < 0.5

    if kill and kill[1] == "post":
        # First in order, so that it is the rule that fires for the first create(s) of that kind of the stack to
        # be killed (its key only): both twins' POSTs, or the first one.
        path = RESOURCES if kill[0] == "resource" else SESSIONS
        rules.insert(
            0,
            (
                "kill-latency",
                {
                    "method": "POST",
                    "path": f"^{path}$",
                    "status": None,
                    "latency": KILL_LATENCY,
                    "times": 2 if twins else 1,
                    "keys": [DIGESTS["a"]],
                },
            ),
        )
    elif kill:
        key = "resource_pending" if kill[0] == "resource" else "session_creating"
        timings[key] = TAKEOVER_TIMING if takeover_kill else KILL_WAIT_TIMING
    if kill and takeover_kill and kill[1] == "post":
        timings["resource_pending" if kill[0] == "resource" else "session_creating"] = TAKEOVER_TIMING
    if kill and zombie:
        timings["resource_pending" if kill[0] == "resource" else "session_creating"] = (
            ZOMBIE_TAKEOVER_TIMING if takeover_kill else ZOMBIE_TIMING
        )
    for kind in dict.fromkeys(k for k, trigger, _ in colleague if trigger == "inflight"):
        if kill and kill[1] == "post" and kill[0] == kind:
            continue  # the kill latency already holds that POST in flight
        path = RESOURCES if kind == "resource" else SESSIONS
        fields: dict[str, Any] = {
            "method": "POST",
            "path": f"^{path}$",
            "latency": COLLEAGUE_LATENCY,
            "times": 1,
            "keys": [DIGESTS["a"], DIGESTS["b"]],  # a stack's POST, not the colleague's own
        }
        # Half of the time the stack's own POST acts then fails: its lookup sees its object and the look-alike.
        if inflight_act:
            fields.update(status=500, act_then_fail=True)
            rules.insert(0, ("colleague-inflight-act-then-500", fields))
        else:
            fields.update(status=None)
            rules.insert(0, ("colleague-inflight-latency", fields))
    slow = None
    if not cli and not kill and rng.random() < 0.15:
        slow = rng.choice(("resource", "session"))
    if deadline is not None:
        # No create timeout (the deadline bounds the create's wait) and no out-of-band stop between two ups (the
        # refresh case stops one itself, past the deadline); the create case's sessions wait in a long queue.
        slow, oob_stop = None, None
        deadline_restore = timings["session_creating"]
        if deadline == "create":
            timings["session_creating"] = DEADLINE_QUEUE
    plan = Plan(
        seed,
        cycle,
        cli,
        sessions,
        prefix,
        timings,
        rules,
        settings,
        fail_next,
        oob_stop,
        oob_index,
        kill,
        kill_delay,
        stacks=stacks,
        twins=twins,
        takeover_kill=takeover_kill,
        takeover_delay=takeover_delay,
        colleague=colleague,
        colleague_late=colleague_late,
        poison=poison,
        backends=backends,
        zombie=zombie,
        deadline=deadline,
        deadline_restore=deadline_restore,
        outage_status=outage_status,
        outage_tail=outage_tail,
    )
    if slow:
        plan.slow = slow
        plan.slow_restore = timings[plan.slow_key]
        timings[plan.slow_key] = SLOW_TIMING
    return plan


def make_runner_plan(seed: int, cycle: int, *, focus: str | None = None) -> Plan:
    """A runner cycle: the cycle's own fault mix (:func:`make_plan`), one stack (or, for two runners, one stack
    run from two machines), the runner case ``RUNNER_CASES[cycle % 3]`` as its interrupt (drawn from an RNG of
    its own). The other team cases (two stacks, cross-backend, twins, a colleague, a zombie engine, a kill
    during a take-over) and the create timeout are left out: their own cycles test them, and a runner cycle is
    about the machine that goes away."""
    plan = make_plan(seed, cycle, focus=focus)
    case = RUNNER_CASES[cycle % len(RUNNER_CASES)]
    rng = random.Random(f"together-rl-chaos:{seed}:{cycle}:runners")
    if plan.slow:
        plan.timings[plan.slow_key] = plan.slow_restore
    plan.rules = [
        (label, rule) for label, rule in plan.rules if not label.startswith(("kill-", "colleague-"))
    ]
    for key in ("resource_pending", "session_creating"):
        plan.timings[key] = round(rng.uniform(0.05, 0.3), 3)
    plan.runner = case
    plan.stacks, plan.backends, plan.twins, plan.zombie = 1, False, False, False
    plan.takeover_kill, plan.colleague, plan.slow, plan.deadline = False, [], None, None
    if case.interrupt == "pause":
        plan.kill, plan.oob_stop = None, None
        plan.timings["resource_pending"] = PAUSE_TIMING
        return plan
    kind, lands = rng.choice(("resource", "session")), rng.choice(case.lands)
    plan.kill = (kind, lands)
    if lands == "post":
        path = RESOURCES if kind == "resource" else SESSIONS
        latency = {"method": "POST", "path": f"^{path}$", "status": None, "latency": KILL_LATENCY}
        plan.rules.insert(0, ("kill-latency", {**latency, "times": 1, "keys": [DIGESTS["a"]]}))
    else:
        plan.timings["resource_pending" if kind == "resource" else "session_creating"] = KILL_WAIT_TIMING
    return plan


# ------------------------------------------------------------------------------------------------- results


@dataclasses.dataclass
class Report:
    """What one cycle did and found (shared by the threads of its stacks)."""

    plan: Plan
    faults: int = 0
    fired: int = 0  # what the rules cleared before the last destroy had fired
    failed_ops: int = 0
    orphans: set[str] = dataclasses.field(default_factory=set)
    duplicates: set[str] = dataclasses.field(default_factory=set)
    billed: set[str] = dataclasses.field(default_factory=set)
    lost: set[str] = dataclasses.field(default_factory=set)
    leaks: set[str] = dataclasses.field(default_factory=set)
    taken: set[str] = dataclasses.field(default_factory=set)
    healthy: set[str] = dataclasses.field(default_factory=set)
    left: set[str] = dataclasses.field(default_factory=set)
    left_named: set[tuple[str, str]] = dataclasses.field(default_factory=set)  # (digest of the stack, id)
    user_stopped: set[str] = dataclasses.field(default_factory=set)  # of those, what the user then stopped
    named: set[tuple[str, str, str]] = dataclasses.field(default_factory=set)  # (digest, stack tag, id)
    unprovable: set[str] = dataclasses.field(default_factory=set)
    # Commands begun once every fault had been cleared (the destroy phase's last try, the cleared phase's up
    # and destroy), and those of them that failed all the same.
    cleared_commands: int = 0
    still_failing: set[str] = dataclasses.field(default_factory=set)
    still_failing_lines: dict[str, str] = dataclasses.field(default_factory=dict)  # key -> the error's line
    session_acts: int = 0  # session creates the API acted on, then answered its own 500/503 (any key's)
    overran: set[str] = dataclasses.field(default_factory=set)  # ran past its deadline
    recreated: set[str] = dataclasses.field(default_factory=set)  # re-created after its deadline
    deadline_ran: bool = False  # the deadline case ran at its moment (see Campaign.deadline_phase)
    queue_until: datetime | None = None  # create: when (API clock) the sessions' long queue was lifted
    destroy_began: datetime | None = None  # when (API clock) the destroy phase began
    # The emulator's clock moves: (its new now, seconds moved), to tell a request's time (the API's clock) on
    # this machine's, which the engines' windows of changes and refreshes are on.
    advanced: list[tuple[datetime, float]] = dataclasses.field(default_factory=list)
    removed: int = 0  # journal entries the user dismissed
    errors: list[str] = dataclasses.field(default_factory=list)  # every error message seen
    outputs: list[str] = dataclasses.field(default_factory=list)  # provider / CLI output
    findings: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    outcome: str = ""
    seconds: float = 0.0
    kills: int = 0
    takeover_kills: int = 0
    second_stack_killed: bool = False
    oob_done: bool = False
    stops_left: int | None = None  # ignored stops the emulator had not spent when the faults were cleared
    disarmed: bool = False
    slow_restored: bool = False
    colleague_made: int = 0
    poisoned: int = 0
    engine_kills: int = 0  # kills of an engine, left unreaped (a zombie)
    zombies_seen: int = 0  # of those, the provider exited on its own while its engine was still a zombie
    unnoticed: set[str] = dataclasses.field(default_factory=set)  # engine deaths the provider did not act on
    # id -> tag of the stack whose provider left its entry with lifeline.GONE_NOTE; the ids a later up then held
    gone_left: dict[str, str] = dataclasses.field(default_factory=dict)
    gone_taken: set[str] = dataclasses.field(default_factory=set)
    backends_seen: bool = (
        False  # cross-backend: both stacks wrote entries of one owner, with their two backends
    )
    paused: bool = False  # two runners: runner 1 was frozen while runner 2 ran up
    straggler_lost: bool = False  # and its create then failed, saying that it lost its lease
    journal_in_bucket: bool = (
        False  # a runner cycle: the journal's entries were beside the state, in the bucket
    )
    since: float = dataclasses.field(default_factory=time.time)  # when the cycle began (journal files since)
    error_lines: list[str] = dataclasses.field(default_factory=list)  # the provider's own error line of each
    evidence: dict[str, str] = dataclasses.field(default_factory=dict)  # file name -> text (--evidence)
    lock: threading.RLock = dataclasses.field(default_factory=threading.RLock, repr=False)

    def find(self, bucket: set[str], key: str, text: str) -> None:
        with self.lock:
            if key not in bucket:
                bucket.add(key)
                self.findings.append(text)

    def failed(self, what: str, exc: BaseException | str, line: str) -> None:
        with self.lock:
            self.failed_ops += 1
            self.errors.append(str(exc))
            self.error_lines.append(f"{what}: {line}")


def first_line(exc: BaseException, limit: int = 400) -> str:
    """The provider's own error line of a failed command (an RPC failure carries the server's traceback)."""
    details = getattr(exc, "details", None)
    if details is None:
        text = str(exc)
    else:
        code = getattr(exc, "code", None)
        if code is not None and code.name == "UNAVAILABLE":
            return f"{exc.rpc}({exc.resource}): the provider process is gone (UNAVAILABLE)"  # type: ignore[attr-defined]
        text = details.split("\n[the provider process has exited", 1)[0]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if "Traceback (most recent call last)" in text:  # not a ProviderError: a bug, its last line says which
        return ("BUG? " + (lines[-1] if lines else ""))[:limit]
    return " ".join(lines)[:limit]  # a ProviderError is its message alone


# ------------------------------------------------------------------------------------------------- stacks


class RecordingEngine(StandInEngine):
    """The stand-in engine, noting when it deletes which id (a stop sent meanwhile is that change's)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.changes: list[tuple[datetime, datetime, frozenset[str]]] = []

    def delete(self, type_: str, name: str, id_: str, *args: Any, **kwargs: Any) -> None:
        start = utcnow()
        try:
            super().delete(type_, name, id_, *args, **kwargs)
        finally:
            with self._lock:
                self.changes.append((start, utcnow(), frozenset({id_})))


class Stack:
    """One deployment of a cycle's declarations: its engine state, its key, its provider process of the moment.
    Cross-backend (``plan.backends``): both stacks have the cycle's stack name (equal owners), and each one's
    provider processes get a ``PULUMI_BACKEND_URL`` of its own. Zombie-engine (``plan.zombie``): stack a's
    provider processes run under an engine process (:class:`harness.engine.ProviderUnderEngine`), which is what
    a kill hits."""

    def __init__(self, campaign: Campaign, plan: Plan, role: str, runner: int = 0):
        self.role = role
        self.plan = plan
        self.name = f"c{plan.cycle}" + ("" if role == "a" or plan.backends else role)
        self.key = KEYS[role]
        self.digest = DIGESTS[role]
        self.engine = RecordingEngine(None, project=PROJECT, stack=self.name)  # type: ignore[arg-type]
        self.config = {"together:apiKey": self.key, "together:baseUrl": campaign.server.base_url}
        self.env = dict(campaign.provider_env)
        self.location: str | None = None  # the canonical location of its backend, where it has one of its own
        if plan.backends:
            folder = campaign.tmp / f"backend-{plan.cycle}-{role}"
            folder.mkdir()
            self.env["PULUMI_BACKEND_URL"] = f"file://{folder}"
            self.location = backend.canonical(f"file://{folder}")
        self.under_engine = plan.zombie and role == "a"
        self._lock = threading.Lock()
        self._current: ProviderProcess | None = None
        self.killed_pid: int | None = None
        self.outcome = ""
        self.gone = False  # two runners: runner 1's job is over, its state is not the stack's
        # The deadline case: the stop_after every session declares, and its history [(API clock, value)] (the user
        # moves it when an error says it has passed, and for the cleared phase's new deployment).
        self.stop_after: str | None = None
        self.stop_after_history: list[tuple[datetime, str]] = []
        self.refreshes: list[
            tuple[datetime, datetime]
        ] = []  # `pulumi refresh` commands (this machine's clock)
        # Runner cycles: the machine its commands run on (``runner``: which of the stack's concurrent runners).
        self.case = plan.runner
        self.runner = runner
        self.machines = 0
        self.machine: Path | None = None
        self.interrupt_over = threading.Event()  # cleared while a runner's interrupt is being carried out
        self.interrupt_over.set()
        if self.case is not None:
            self.cycle, self.tmp, self.bucket = plan.cycle, campaign.tmp, campaign.bucket_of(plan)
            self.location = backend.canonical(self.bucket.url)
            self.new_machine()

    def new_machine(self) -> None:
        """Runner cycles: the next command runs on a fresh machine (a CI runner): its own HOME, XDG folders
        (its local create journal would be there) and TMPDIR, logged into the cycle's bucket
        (``PULUMI_BACKEND_URL``: the provider finds the journal beside the state there, as it does for a
        ``pulumi login`` of a bucket). The stack's state is the stand-in engine's, which outlives the machine as
        the bucket backend's would; after an interrupt it holds what ``recover`` leaves when the CLI cannot
        import a pending create (nothing of the interrupted create: the next ``up`` takes it over by id)."""
        self.machines += 1
        root = self.tmp / f"runner-{self.cycle}-{self.runner}-{self.machines}"
        folders = machine_folders(root)
        self.machine = root
        self.env = {
            **self.env,
            **{key: str(folder) for key, folder in folders.items()},
            **self.bucket.env,
            "PULUMI_BACKEND_URL": self.bucket.url,
            "TOGETHER_RL_STATE_DIR": None,  # the machine's own folder: lost with it
            "TOGETHER_RL_JOURNAL_URL": None,  # found beside the backend, not told
            "TOGETHER_RL_LEASE_SECONDS": f"{RUNNER_LEASE:g}",
        }

    @property
    def label(self) -> str:
        return f"stack {self.role} ({self.name})" + (f" on runner {self.runner}" if self.runner else "")

    @property
    def tag(self) -> str:
        """What tells it apart from the cycle's other stack, whose name may be the same (cross-backend), or from
        another runner of the same stack."""
        return f"{self.role}:{self.name}" + (f"@runner{self.runner}" if self.runner else "")

    def owns(self, entry: Entry) -> bool:
        """Whether a create journal entry is one of this stack's (its declarations, and its backend)."""
        return f"/{self.name}/" in str(entry.owner) and (
            self.location is None or entry.backend_location == self.location
        )

    def owner(self, name: str) -> str:
        """The ``owner`` input ModelResource/TrainingSession add from the program: org/project/stack/name."""
        return f"-/{PROJECT}/{self.name}/{name}"

    @property
    def changes(self) -> list[tuple[datetime, datetime, frozenset[str]]]:
        return self.engine.changes

    def current(self) -> ProviderProcess | None:
        with self._lock:
            return self._current

    def set_current(self, process: ProviderProcess | None) -> None:
        with self._lock:
            self._current = process

    def kill(self, process: ProviderProcess, *, engine: bool = True) -> bool:
        """SIGKILL ``process`` if it is still this stack's provider and alive: under an engine, the engine (left
        unreaped) unless ``engine`` is False; else the provider itself. Runner cycles: the runner's interrupt
        (its process tree SIGKILLed, or GitHub's cancel), then the machine deleted; the next command runs on
        another one. The caller sets :attr:`interrupt_over` once it has counted the kill."""
        with self._lock:
            if self._current is not process or not process.alive or process.provider_pid is None:
                return False
            if self.case is not None:
                self.killed_pid = process.provider_pid
                self.interrupt_over.clear()  # the command's end waits for the rest of the interrupt
        if self.case is not None:
            if self.case.interrupt == "github-cancel":
                github_cancel(process)
            else:
                kill_tree(process.provider_pid)
            self.throw_away()
            return True
        with self._lock:
            if self._current is not process or not process.alive or process.provider_pid is None:
                return False
            if engine and isinstance(process, ProviderUnderEngine):
                if not process.kill():
                    return False
            else:
                os.kill(process.provider_pid, signal.SIGKILL)
            self.killed_pid = process.provider_pid
            return True

    def throw_away(self) -> None:
        """The runner is gone: its folders deleted (its processes are dead); the next command gets a new one."""
        if self.machine is not None:
            shutil.rmtree(self.machine, ignore_errors=True)
        self.new_machine()

    def held(self) -> dict[str, str]:
        return {urn.rsplit("::", 1)[1]: entry["id"] for urn, entry in self.engine.state.items()}

    def pending(self) -> set[str]:
        return {entry["id"] for _urn, entry, _meta in self.engine._pending_deletes}

    def state_dump(self) -> str:
        return json.dumps([self.engine.state, self.engine._pending_deletes], default=str)


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and every process descending from it, frozen first (SIGSTOP) so that none forks or is
    reparented away between the look and the kill: a machine going down (``harness.runner.Runner.kill``)."""
    kill_frozen(lambda: descendants({pid}))


def github_cancel(process: ProviderProcess) -> None:
    """GitHub Actions' cancel of the step running ``up``: SIGINT, SIGTERM 7.5 s later if it still runs, SIGKILL
    of its process tree 2.5 s after that (and of what is left of it when it ends earlier: the runner kills orphan
    processes at the job's end). The stand-in engine runs in this process, so the signals go to the one process
    of the step that is not this one: the provider (the engine ends its plugins with SIGINT, too)."""
    assert process.proc is not None and process.provider_pid is not None
    tree = descendants({process.provider_pid})
    os.kill(process.provider_pid, signal.SIGINT)
    for then, wait in ((signal.SIGTERM, GITHUB_SIGTERM_AFTER), (None, GITHUB_SIGKILL_AFTER)):
        try:
            process.proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            if then is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.provider_pid, then)
    if process.proc.poll() is None:
        kill_tree(process.provider_pid)
    for pid in tree - {process.provider_pid}:  # (the provider reaped, its pid is not its own any more)
        kill_tree(pid)


def each(stacks: list[Any], action: Callable[[Any], Any]) -> list[Any]:
    """``action(stack)`` for every stack at once (one thread each: two stacks run concurrently)."""
    if len(stacks) == 1:
        return [action(stacks[0])]
    with ThreadPoolExecutor(max_workers=len(stacks), thread_name_prefix="chaos-stack") as pool:
        futures = [pool.submit(action, stack) for stack in stacks]
        return [future.result() for future in futures]


# ------------------------------------------------------------------------------------------------- CLI cycles


class CLIDeployment:
    """One stack of ``examples/sweep`` run through the real Pulumi CLI, with its own key and file backend.
    Cross-backend (``plan.backends``): the second stack has the first one's name, and runs in a checkout of its own
    (a copy of the project: the stack config file ``Pulumi.<stack>.yaml`` lives in the project folder)."""

    def __init__(self, campaign: Campaign, plan: Plan, role: str, bin_dir: str):
        from harness.cli import CLIStack

        self.role = role
        self.key = KEYS[role]
        self.digest = DIGESTS[role]
        suffix = "" if role == "a" else f"-{role}"
        emulator = types.SimpleNamespace(
            base_url=campaign.server.base_url, api_key=self.key, control=campaign.control
        )
        folder = campaign.tmp / f"cli-{plan.cycle}{suffix}"
        project = SWEEP
        if plan.backends and role != "a":
            project = checkout(SWEEP, folder / "project")
        self.stack = CLIStack(
            project,
            folder,
            emulator,
            bin_dir=bin_dir,
            name=f"chaos-{plan.cycle}-{plan.prefix}" + ("" if plan.backends else suffix),
            TOGETHER_RL_STATE_DIR=str(campaign.state_dir),
            TOGETHER_RL_POLL_INTERVAL="0.05",
        )
        self.name = self.stack.name
        self.location = backend.canonical(f"file://{self.stack.backend}")
        self.changes: list[tuple[datetime, datetime, frozenset[str]]] = []
        self._held: dict[str, str] = {}
        self.outcome = ""

    @property
    def label(self) -> str:
        return f"stack {self.role} ({self.name})"

    @property
    def tag(self) -> str:
        return f"{self.role}:{self.name}"

    def owns(self, entry: Entry) -> bool:
        return f"/{self.name}/" in str(entry.owner) and entry.backend_location == self.location

    def held(self) -> dict[str, str]:
        return dict(self._held)

    def pending(self) -> set[str]:
        return set()

    def refresh_held(self) -> None:
        self._held = {name: e["id"] for name, e in self.stack.resources().items() if e.get("id")}


def checkout(project: Path, folder: Path) -> Path:
    """A second checkout of ``project`` in ``folder`` (its program and project file; the venv it names made
    absolute), as a colleague's clone, or a developer's second one, would be."""
    import yaml  # the Pulumi SDK's own dependency

    folder.mkdir(parents=True)
    shutil.copy2(project / "__main__.py", folder / "__main__.py")
    settings = yaml.safe_load((project / "Pulumi.yaml").read_text())
    options = settings["runtime"]["options"]
    options["virtualenv"] = str((project / options["virtualenv"]).resolve())
    (folder / "Pulumi.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))
    return folder


class CLICampaign:
    """The CLI cycles (a mixin of :class:`Campaign`)."""

    def cli(self: Any, report: Report, dep: CLIDeployment, *args: str) -> tuple[bool, str]:
        """One ``pulumi`` command of ``dep``: (whether it succeeded, its output). What it deleted or replaced is
        noted as that stack's change (a destroy: every id held before; an up: the ids held before, not after)."""
        before = set(dep.held().values())
        start = utcnow()
        cleared = self.begun_cleared(report)
        result = dep.stack.run(*args, check=False, timeout=600)
        end = utcnow()
        with report.lock:
            report.outputs.append(result.output)
        dep.refresh_held()
        if args[0] == "destroy":
            dep.changes.append((start, end, frozenset(before)))
        elif args[0] == "up":
            dep.changes.append((start, end, frozenset(before - set(dep.held().values()))))
        if result.returncode != 0:
            said = [line.strip() for line in result.output.splitlines() if "error:" in line]
            line = (said or ["exit status " + str(result.returncode)])[-1]
            report.failed(f"{dep.label} pulumi {args[0]}", result.output, line)
            if cleared:
                self.still_failing(report, dep, f"pulumi {args[0]}", line)
        return result.returncode == 0, result.output

    def cli_up_phase(
        self: Any, dep: CLIDeployment, report: Report, between: Callable[[], Any] | None = None
    ) -> bool:
        """As :meth:`Campaign.up_phase`, through the CLI (``between``: after the first try, whatever it did)."""
        tries, attempt = TRIES, 0
        while attempt < min(tries, TRIES + EXTRA_TRIES):
            attempt += 1
            ok, output = self.cli(report, dep, "up", "--yes", "--skip-preview")
            self.audit_taken(report, [dep])
            if self.user_reads(report, dep, [output]):
                tries += 1
            if attempt == 1 and between is not None:
                between()
            if ok:
                return True
        return False

    def cli_destroy_phase(self: Any, dep: CLIDeployment, report: Report, colleague: Colleague | None) -> bool:
        for attempt in range(1, TRIES + 1):
            if attempt == TRIES:
                self.disarm_once(report)
                if colleague is not None:
                    colleague.stop_sessions()
            if self.cli(report, dep, "destroy", "--yes", "--skip-preview")[0]:
                return True
        return False

    def cli_cleared_phase(self: Any, plan: Plan, deps: list[CLIDeployment], report: Report) -> list[bool]:
        """As :meth:`Campaign.cleared_phase`, through the CLI: ``pulumi up`` then ``pulumi destroy`` of each
        stack, one try each, every fault cleared, no command of the user's in between."""
        self.disarm_once(report)
        ups = each(deps, lambda d: self.cli(report, d, "up", "--yes", "--skip-preview"))
        for dep, (_ok, output) in zip(deps, ups, strict=True):
            self.note_named(report, dep, [output])
        self.audit_up(plan, deps, report, [ok for ok, _ in ups])
        downs = each(deps, lambda d: self.cli(report, d, "destroy", "--yes", "--skip-preview"))
        return [up[0] and down[0] for up, down in zip(ups, downs, strict=True)]

    def run_cli_cycle(self: Any, plan: Plan) -> Report | None:
        from harness.cli import provide

        found, reason = provide()
        if not found:
            print(f"chaos: skipping the CLI cycles: {reason}", file=sys.stderr)
            return None
        report = Report(plan)
        started = time.monotonic()
        self.control.reset()
        deps = [CLIDeployment(self, plan, "a", found)] + (
            [CLIDeployment(self, plan, "b", found)] if plan.stacks == 2 else []
        )
        colleague: Colleague | None = None
        try:
            for dep in deps:
                dep.stack.init(
                    {
                        "sessions": len(plan.sessions),
                        "loraRanks": [s[2] for s in plan.sessions],
                        "namePrefix": plan.prefix,
                    },
                    api_key=dep.key,
                )
            self.arm(plan)
            if plan.colleague:
                colleague = Colleague(self, plan, deps, None)
                colleague.start()
            if plan.backends:  # the second stack's up phase before the first one's re-runs
                second: list[bool] = []
                first = self.cli_up_phase(
                    deps[0], report, lambda: second.append(self.cli_up_phase(deps[1], report))
                )
                converged = [first, *second]
            else:
                converged = each(deps, lambda d: self.cli_up_phase(d, report))
            self.audit_up(plan, deps, report, converged)
            self.check_backends(plan, deps, report)
            for dep, ok in zip(deps, converged, strict=True):
                dep.outcome = "CLI: " + ("converged" if ok else "UNCONVERGED")
            if converged[0] and plan.oob_stop:
                try:
                    ids = deps[0].held()
                    with TogetherRL(api_key=KEYS["oob"], base_url=self.server.base_url) as client:
                        if plan.oob_stop == "resource":
                            client.stop_model_resource(ids["sweep-gpu"], force=True)
                        else:
                            client.stop_training_session(ids[plan.sessions[plan.oob_index][0]])
                    report.oob_done = True
                except Exception as exc:
                    report.errors.append(f"out-of-band stop: {exc}")
                converged[0] = self.cli_up_phase(deps[0], report)
                self.audit_up(plan, deps, report, converged)
                deps[0].outcome += ", re-up " + ("converged" if converged[0] else "UNCONVERGED")
            if colleague is not None:
                colleague.finish()
                if not plan.colleague_late:
                    colleague.stop_sessions()
            destroyed = each(deps, lambda d: self.cli_destroy_phase(d, report, colleague))
            self.audit_billed(deps, report, "after its destroy")
            cleared = self.cli_cleared_phase(plan, deps, report)
            for dep, ok, ok_cleared in zip(deps, destroyed, cleared, strict=True):
                dep.outcome += "" if ok else ", DESTROY FAILED"
                dep.outcome += "" if ok_cleared else ", STILL FAILING WITH FAULTS CLEARED"
            self.finish(plan, report, deps, {f"stack export of {d.label}": d.stack.export() for d in deps})
            report.outcome = "; ".join(f"{d.role}: {d.outcome}" for d in deps)
        finally:
            if colleague is not None:
                colleague.finish()
                report.notes += colleague.said
                colleague.close()
            self.disarm()
            for dep in deps:
                dep.stack.run("stack", "rm", "--yes", "--force", check=False, timeout=120)
                (dep.stack.project / f"Pulumi.{dep.name}.yaml").unlink(missing_ok=True)
        report.seconds = time.monotonic() - started
        return report


# ------------------------------------------------------------------------------------------------- campaign


class Campaign(CLICampaign):
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.tmp = Path(tempfile.mkdtemp(prefix="together-rl-chaos-"))
        self.state_dir = self.tmp / "state"
        # The create journal of every provider this campaign starts (and of this process: the killer reads it).
        os.environ["TOGETHER_RL_STATE_DIR"] = str(self.state_dir)
        start = {key: 0.1 for key in TIMING_KEYS}
        # One user, the team's keys: every stack's, the colleague's, the out-of-band stopper's (and no other).
        self.server = EmulatorServer(timings=start, api_keys=[KEYS[role] for role in ROLES]).start()
        self.control = EmulatorControl(self.server.base_url)
        self.provider_env = {
            "TOGETHER_API_KEY": None,
            "TOGETHER_BASE_URL": None,
            "TOGETHER_RL_POLL_INTERVAL": "0.05",
            "TOGETHER_RL_STATE_DIR": str(self.state_dir),
        }
        self.mr_blob = provider_blob(_ModelResourceProvider())
        self.ts_blob = provider_blob(_TrainingSessionProvider())
        self.s3: S3Server | None = (
            None  # the runner cycles' S3-compatible server (moto), started for the first
        )
        self.buckets: dict[int, Bucket] = {}  # cycle -> its bucket (state backend and create journal)

    def close(self) -> None:
        self.control.close()
        self.server.stop()
        if self.s3 is not None:
            self.s3.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def bucket_of(self, plan: Plan) -> Bucket:
        """The runner cycle's own bucket on the campaign's loopback S3 server (this process reads the journal
        there too: the killers, the audits, the user's ``journal dismiss``)."""
        if self.s3 is None:
            self.s3 = S3Server().start()
        if plan.cycle not in self.buckets:
            made = self.buckets[plan.cycle] = self.s3.bucket(f"chaos-{plan.seed}-{plan.cycle}")
            os.environ.update(made.env)
        return self.buckets[plan.cycle]

    def bucket_text(self, plan: Plan) -> str:
        """Every object of the cycle's bucket (the journal's entries, claims and probes), as text."""
        made = self.buckets[plan.cycle]
        texts = []
        for key in made.keys():
            answer = httpx.get(f"http://{made.endpoint}/{made.name}/{key}", timeout=10)
            texts.append(f"{key}: {answer.text}")
        return "\n".join(texts)

    # ---------------------------------------------------------------------------------------- arming

    def arm(self, plan: Plan) -> list[str]:
        self.control.reset()
        self.control.configure(timings=plan.timings, **plan.settings)
        for kind, code in plan.fail_next:
            self.control.fail_next(kind, code, message=plan.message)
        for collection, items in plan.poison.items():
            self.control.set_list_extras(collection, items)
        return [self.control.add_fault(**fields) for _, fields in plan.rules]

    def disarm(self, report: Report | None = None) -> dict[str, Any]:
        """Clear every rule, list poison and lag setting (adding what the rules fired to ``report``); returns
        the settings as they were (``stops_ignored``: the ignored stops not spent)."""
        before = self.control.settings()
        if report is not None:
            report.fired += sum(rule["fired"] for rule in self.control.faults())
        self.control.clear_faults()
        self.control.configure(read_lag=0.0, list_lag=0.0, stops_ignored=0)
        for collection in COLLECTION.values():
            self.control.set_list_extras(collection, [])
        return before

    def disarm_once(self, report: Report) -> None:
        """Before a stack's last destroy try (or, when every destroy succeeded sooner, before the cleared phase):
        the first stack there clears the faults for every stack, and spends a fail-next no object used."""
        with report.lock:
            if not report.disarmed:
                report.poisoned = self.poisoned_lists(report.plan)
                report.stops_left = self.disarm(report)["stops_ignored"]
                self.spend_fail_next(report)
                report.disarmed = True

    def spend_fail_next(self, report: Report) -> None:
        """A fail-next that no object used during the faulty phase (a session's, when the stack's model resource
        never got READY) stays armed in the emulator, which has no call that disarms one: the cleared phase's
        create would land in ERROR, a fault that was not cleared. It is spent here, on objects of the out-of-band
        key's own, made and then failed or stopped (never active at an audit point). The audits leave that key's
        objects out (it is no stack's, nor the colleague's), and the faults injected do not count it."""
        state = self.control.state()
        for kind, _code in report.plan.fail_next:
            table = state["model_resources" if kind == "model_resource" else "training_sessions"]
            if any((o.get("error") or {}).get("message") == report.plan.message for o in table):
                continue  # it landed
            with httpx.Client(
                base_url=self.server.base_url,
                headers={"Authorization": f"Bearer {KEYS['oob']}", "User-Agent": "chaos-spender/1.0"},
                timeout=15.0,
            ) as http:
                resource = http.post(RESOURCES, json=RESOURCE_BODY).raise_for_status().json()["id"]
                status = self.settled(resource, "model_resources", ("PENDING", "CREATING"))
                if kind == "training_session" and status == "READY":
                    session = (
                        http.post(
                            SESSIONS,
                            json={
                                "model_resources_id": resource,
                                "display_name": "chaos-spent-fail-next",
                                "lora_config": {"rank": 8, "alpha": 16},
                            },
                        )
                        .raise_for_status()
                        .json()["id"]
                    )
                    if self.settled(session, "training_sessions", ("CREATING",)) == "RUNNING":
                        http.post(f"{SESSIONS}/{session}/stop").raise_for_status()
                    self.settled(session, "training_sessions", SESSION_ACTIVE)
                if status == "READY":
                    http.post(f"{RESOURCES}/{resource}/stop", params={"force": "true"}).raise_for_status()
                self.settled(resource, "model_resources", RESOURCE_ACTIVE)
            with report.lock:
                report.notes.append(
                    f"the {kind.replace('_', ' ')} fail-next was still armed when the faults were cleared: "
                    "spent on an object of the out-of-band key"
                )

    def settled(self, ident: str, table: str, passing: tuple[str, ...], timeout: float = 60.0) -> str:
        """The status of ``ident`` (in the emulator's ``table``) once it is none of ``passing``."""
        deadline = time.monotonic() + timeout
        while True:
            found = next((o for o in self.control.state()[table] if o["id"] == ident), None)
            status = short(found["status"]) if found else "GONE"
            if status not in passing or time.monotonic() > deadline:
                return status
            time.sleep(0.05)

    @staticmethod
    def begun_cleared(report: Report) -> bool:
        """Whether a command beginning now runs with every fault cleared (and counts it if so)."""
        with report.lock:
            if report.disarmed:
                report.cleared_commands += 1
            return report.disarmed

    @staticmethod
    def blocked_by_left(report: Report) -> int:
        """Of the commands still failing after faults cleared, those whose error names an object left for the
        user to decide (a session of the stack's own key, named among look-alikes and dismissed, attached to the
        stack's model resource, whose destroy the provider refuses): they wait for the user's decision, which the
        cleared phase does not take. Still counted as still failing; said apart, so the cause is read at once."""
        with report.lock:
            return sum(
                1 for line in report.still_failing_lines.values() if any(i in line for i in report.left)
            )

    @staticmethod
    def still_failing(report: Report, stack: Any, what: str, line: str) -> None:
        """A command that failed although every fault had been cleared before it began."""
        with report.lock:
            key = f"{stack.tag}:{what}:{report.cleared_commands}"
            report.still_failing_lines[key] = line
        report.find(
            report.still_failing,
            key,
            f"still failing after faults cleared: {stack.label} {what} failed with every fault cleared: {line}",
        )

    def poisoned_lists(self, plan: Plan) -> int:
        """How many of the poisoned lists were read (while poisoned: before the faults are cleared)."""
        listed = {r["path"] for r in self.control.requests() if r["method"] == "GET" and r["handled"]}
        return sum(f"/v1/rl/{collection}" in listed for collection in plan.poison)

    def restore_slow(self, plan: Plan, report: Report) -> None:
        """After the first try: the capacity queue was long for it only (a user raising nothing, re-running)."""
        with report.lock:
            if not report.slow_restored:
                report.slow_restored = True
                self.control.configure(timings={plan.slow_key: plan.slow_restore})

    # ---------------------------------------------------------------------------------------- commands

    def command(
        self, report: Report, stack: Stack, what: str, action: Callable[[list[str]], Any]
    ) -> tuple[bool, list[str]]:
        """One CLI command (up / destroy) of ``stack`` in a fresh provider process: (whether it succeeded, the
        error messages it raised)."""
        if stack.under_engine:
            process: ProviderProcess = ProviderUnderEngine(
                ROOT, stack.env, project=PROJECT, exit_timeout=ENGINE_EXIT_BOUND
            )
        else:
            process = ProviderProcess(ROOT, stack.env, project=PROJECT)
        engine = stack.engine
        engine.process = process
        # A fresh plugin: the engine handshakes and configures it again (the stand-in keeps its state).
        engine._started = False
        engine._configured = False
        stack.set_current(process)
        errors: list[str] = []
        cleared = self.begun_cleared(report)
        try:
            engine.configure(stack.config, secret_keys=["together:apiKey"])
            action(errors)
            return True, errors
        except EngineError as exc:
            errors.insert(0, str(exc))
            report.failed(f"{stack.label} {what}", exc, first_line(exc))
            if cleared:
                self.still_failing(report, stack, what, first_line(exc))
            return False, errors
        finally:
            stack.set_current(None)
            stack.interrupt_over.wait(timeout=60)  # a runner's interrupt goes on after the RPC failed
            # Also reaps a killed one (the journal must see its pid as gone); a zombie engine only once the
            # provider has exited, on its own or not.
            process.stop()
            with report.lock:
                report.outputs.append(
                    f"== {stack.label} {what} (pid {process.provider_pid})\n{process.output()}"
                )
            if isinstance(process, ProviderUnderEngine) and process.engine_killed is not None:
                self.audit_engine_death(report, stack, process)

    def up(self, plan: Plan, stack: Stack, report: Report, errors: list[str]) -> None:
        engine = stack.engine
        engine.refresh()  # refresh: always (every example's Pulumi.yaml)
        with engine.deployment() as deployment:

            def resource(name: str) -> Any:
                inputs = {
                    "__provider": self.mr_blob,
                    "base_model": MODEL,
                    "lora_enabled": True,
                    "compute_config": {"num_generator_replicas": 1},
                    "owner": stack.owner(name),
                    **({"create_timeout": SLOW_TIMEOUT} if plan.slow == "resource" else {}),
                }
                return deployment.register(MR, name, inputs)

            # Independent steps run in parallel (the twins), and one failing does not stop the others.
            resources = run_all(plan.resource_names(), resource)
            failures = [exc for _, exc in resources if exc is not None]
            gpu = resources[0][0]
            if gpu is not None:

                def register(session: tuple[str, str, int]) -> Any:
                    name, display, rank = session
                    inputs = {
                        "__provider": self.ts_blob,
                        "model_resources_id": gpu.id,
                        "lora_config": {"rank": rank, "alpha": 2 * rank},
                        "display_name": display,
                        "owner": stack.owner(name),
                        **({"create_timeout": SLOW_TIMEOUT} if plan.slow == "session" else {}),
                        **({"stop_after": self.stop_after(plan, stack, report)} if plan.deadline else {}),
                    }
                    return deployment.register(
                        TS, name, inputs, property_dependencies={"model_resources_id": [gpu.urn]}
                    )

                failures += [exc for _, exc in run_all(plan.declared_sessions(), register) if exc is not None]
            for extra in failures[1:]:
                errors.append(str(extra))
                with report.lock:
                    report.errors.append(str(extra))
                    report.error_lines.append(f"{stack.label} up: {first_line(extra)}")
            if failures:
                raise failures[0]

    def up_phase(
        self,
        plan: Plan,
        stack: Stack,
        report: Report,
        killer: Killer | None,
        *,
        first: bool,
        between: Callable[[], Any] | None = None,
    ) -> bool:
        """``pulumi up`` until it succeeds: at most TRIES tries, plus one per interrupt and per try after which
        the user dismissed a journal entry (bounded). ``between`` runs once after the first try, whatever it did
        (cross-backend: the other stack's up phase, before this one's re-run)."""
        tries, attempt = TRIES, 0
        takeover: TakeoverKiller | None = None
        try:
            while attempt < min(tries, TRIES + EXTRA_TRIES):
                attempt += 1
                ok, errors = self.timed_up(plan, stack, report)
                if first and attempt == 1 and plan.slow:
                    self.restore_slow(plan, report)
                self.audit_taken(report, [stack])  # an audit point: the end of every up
                if takeover is not None:  # it watched the try after the kill, and only that one
                    takeover.stop.set()
                    takeover.join(timeout=5)
                    if takeover.fired.is_set():
                        with report.lock:
                            report.takeover_kills += 1
                        tries += 1
                    takeover = None
                if killer is not None and killer.fired.is_set() and not killer.counted:
                    killer.counted = True
                    with report.lock:
                        report.kills += 1
                        report.second_stack_killed = report.second_stack_killed or plan.stacks == 2
                    tries += 1
                    killer.stop.set()
                    self.await_inflight(killer)
                    if plan.takeover_kill:
                        takeover = TakeoverKiller(stack, plan.takeover_delay)
                        takeover.start()
                if self.user_reads(report, stack, errors):
                    tries += 1
                if plan.deadline and any(PASSED.search(text) for text in errors):
                    self.move_deadline(plan, stack, report, "the error said it has passed")
                    tries += 1
                if attempt == 1 and between is not None:
                    between()
                if ok:
                    return True
            return False
        finally:
            if takeover is not None:
                takeover.stop.set()
                takeover.join(timeout=5)

    def timed_up(self, plan: Plan, stack: Stack, report: Report, what: str = "up") -> tuple[bool, list[str]]:
        """One ``up`` of ``stack``; in a deadline cycle, a succeeded one is audited for what ran past its deadline
        (:meth:`audit_overrun`), with when it began on both clocks."""
        began = (utcnow(), self.control.now()) if plan.deadline else None
        ok, errors = self.command(report, stack, what, lambda errs: self.up(plan, stack, report, errs))
        if ok and began is not None:
            self.audit_overrun(plan, stack, report, *began)
        return ok, errors

    # ---------------------------------------------------------------------------------------- deadlines

    def stop_after(self, plan: Plan, stack: Stack, report: Report) -> str:
        """The ``stop_after`` every session of the stack declares: a duration for the refresh case; for the others
        a time, fixed when the stack first declares its sessions (as a user writes one into the program), then
        moved only as :meth:`move_deadline` says."""
        with report.lock:
            if stack.stop_after is None:
                if plan.deadline == "refresh":
                    self.declare_deadline(stack, DEADLINE_DURATION)
                else:
                    ahead = DEADLINE_CREATE_AHEAD if plan.deadline == "create" else DEADLINE_OUTAGE_AHEAD
                    self.declare_deadline(stack, rfc3339(utcnow() + timedelta(seconds=ahead)))
            assert stack.stop_after is not None
            return stack.stop_after

    def declare_deadline(self, stack: Stack, value: str) -> None:
        """The stack's declarations from now on carry ``value`` (its history on the API's clock: an object's
        deadline is the value declared when it was created)."""
        stack.stop_after_history.append((self.control.now(), value))
        stack.stop_after = value

    def move_deadline(
        self, plan: Plan, stack: Stack, report: Report, why: str, ahead: float | None = None
    ) -> None:
        """The user moves a time deadline ahead (a duration never passes before its object exists): after an
        error that says it has passed (a create that reached it first: the check's and the create's own advice),
        or for the cleared phase's new deployment."""
        if plan.deadline == "refresh":
            return
        if ahead is None:
            ahead = DEADLINE_CREATE_AHEAD if plan.deadline == "create" else DEADLINE_OUTAGE_AHEAD
        with report.lock:
            old = stack.stop_after
            self.declare_deadline(stack, rfc3339(utcnow() + timedelta(seconds=ahead)))
            report.notes.append(
                f"{stack.label}: the user moved stop_after {old} to {stack.stop_after} ({why})"
            )

    @staticmethod
    def declared_at(stack: Stack, created: datetime) -> str | None:
        """The stop_after the stack declared when an object was created at ``created`` (the API's clock)."""
        values = [value for at, value in stack.stop_after_history if at <= created]
        return values[-1] if values else None

    def deadline_of(self, stack: Stack, obj: dict[str, Any]) -> datetime | None:
        """The deadline of ``obj`` (the API's clock), from what the stack declared when it was made, if it is one
        of the stack's sessions (by the key that made it and a declared display name); never from its state."""
        if not getattr(stack, "stop_after_history", None) or "model_resources_id" not in obj:
            return None
        if obj.get("display_name") not in {display for _n, display, _r in stack.plan.declared_sessions()}:
            return None
        created = parse_time(obj["created_at"])
        value = self.declared_at(stack, created)
        if value is None:
            return None
        if value == DEADLINE_DURATION:
            return created + timedelta(minutes=1)
        return parse_time(value)

    @staticmethod
    def on_this_machine(report: Report, at: datetime) -> datetime:
        """A time on the API's clock (the emulator's, which the campaign moves) told on this machine's."""
        return at - timedelta(seconds=sum(seconds for moved, seconds in report.advanced if at >= moved))

    def advance(self, report: Report, seconds: float) -> None:
        now = self.control.advance(seconds)
        with report.lock:
            report.advanced.append((now, seconds))

    def refresh(self, stack: Stack) -> None:
        """`pulumi refresh`, its window noted: a stop sent meanwhile is no deadline's (a refresh stops nothing)."""
        start = utcnow()
        try:
            stack.engine.refresh()
        finally:
            stack.refreshes.append((start, utcnow()))

    def user_reads(self, report: Report, stack: Any, errors: Iterable[str]) -> int:
        """The user reads the errors of a failed ``up``: where one says that none of the look-alikes can be
        proven this create's and names the command that dismisses its journal entry "if none is" (or adopt_id
        "if one is"), the user, who cannot tell either, runs that command. Returns how many were dismissed."""
        dismissed = 0
        for text in errors:
            self.note_named(report, stack, [text])
            for match in DISMISS.finditer(text):
                entry = match.group(1)
                named = {i for found in CANDIDATES.finditer(text) for i in UUID.findall(found.group(1))}
                with report.lock:
                    report.left_named |= {(stack.digest, ident) for ident in named}
                done = subprocess.run(
                    [sys.executable, "-m", "pulumi_together_rl", "journal", "dismiss", entry],
                    env={**os.environ, "TOGETHER_RL_STATE_DIR": str(self.state_dir)},
                    capture_output=True,
                    text=True,
                    timeout=120,
                    check=False,
                )
                if done.returncode == 0:
                    dismissed += 1
                    with report.lock:
                        report.removed += 1
                        report.notes.append(
                            f"{stack.label}: the user dismissed the journal entry {entry} "
                            f"(candidates named: {', '.join(sorted(named)) or 'none'})"
                        )
        return dismissed

    @staticmethod
    def note_named(report: Report, stack: Any, errors: Iterable[str]) -> None:
        """The look-alikes a failed command's errors named as candidates none of which could be proven the
        stack's (what ``left for the user to decide`` reads)."""
        with report.lock:
            report.named |= {
                (stack.digest, stack.tag, ident)
                for text in errors
                for found in CANDIDATES.finditer(text)
                for ident in UUID.findall(found.group(1))
            }

    def cleared_phase(self, plan: Plan, stacks: list[Stack], report: Report) -> list[bool]:
        """Once every fault is cleared (and every stack's destroy phase is over): each stack's ``up``, then its
        ``destroy``, one try each, and no command of the user's in between (no ``journal dismiss``, no
        ``adopt_id``): a stack whose commands still fail with nothing injected any more is wedged by what the
        faulty phase left (a journal entry, an object no state holds, a session on its model resource), and each
        such command is ``still failing after faults cleared``. The ``up`` is an audit point (its errors' named
        look-alikes noted, as any try's); whether each stack got through both is returned."""
        self.disarm_once(report)
        for stack in stacks:  # a new deployment after the destroy: a time that has passed is refused at check
            self.move_deadline(plan, stack, report, "a new deployment", ahead=3600.0)
        ups = each(
            stacks,
            lambda s: self.command(
                report, s, "up (faults cleared)", lambda errs: self.up(plan, s, report, errs)
            ),
        )
        for stack, (_ok, errors) in zip(stacks, ups, strict=True):
            self.note_named(report, stack, errors)
        self.audit_up(plan, stacks, report, [ok for ok, _ in ups])
        downs = each(
            stacks,
            lambda s: self.command(report, s, "destroy (faults cleared)", lambda errs: s.engine.destroy()),
        )
        return [up[0] and down[0] for up, down in zip(ups, downs, strict=True)]

    def await_inflight(self, killer: Killer) -> None:
        """After a kill during a POST's latency: let those POSTs land before the user's next `pulumi up`."""
        if killer.when != "post":
            return
        deadline = time.monotonic() + KILL_LATENCY + 5
        while time.monotonic() < deadline:
            fired = next((r["fired"] for r in self.control.faults() if r["id"] == killer.rule_id), 0)
            landed = sum(1 for r in self.control.requests() if r.get("fault") == killer.rule_id)
            if fired and landed >= fired:
                return
            time.sleep(0.05)

    def destroy_phase(self, plan: Plan, stack: Stack, report: Report, colleague: Colleague | None) -> bool:
        for attempt in range(1, TRIES + 1):
            if attempt == TRIES:
                self.disarm_once(report)
                if colleague is not None:
                    colleague.stop_sessions()  # his training is over, at the latest now
            ok, errors = self.command(report, stack, "destroy", lambda errs: stack.engine.destroy())
            if ok:
                return True
            self.user_decides(report, stack, errors)
        return False

    def user_decides(self, report: Report, stack: Any, errors: Iterable[str]) -> None:
        """The user reads a failed ``destroy``: where the API refused to stop the stack's model resource because
        sessions the stack does not manage are attached, and one of them is a session left for the user to decide
        (an error named it among look-alikes of the stack's own interrupted create, and the user then dismissed
        that create's journal entry), the user asks the team whose it is. Nobody claims the one the stack's own key
        made (the campaign knows who made what; the colleague claims his own and stops them himself), so the user
        stops it, as the error says, with the stack's key, and waits until it holds nothing. A user who followed
        the error's advice: the cleared phase then shows whether anything else still wedges the stack."""
        named = {
            i for text in errors for found in ATTACHED.finditer(text) for i in UUID.findall(found.group(1))
        }
        if not named:
            return
        state = self.control.state()
        theirs = {
            ident
            for ident in named
            if (stack.digest, ident) in report.left_named and state["created_with"].get(ident) == stack.digest
        }
        if not theirs:
            return
        with report.lock:
            report.user_stopped |= theirs
        deadline = time.monotonic() + 15
        pending, sent = set(theirs), set()
        with TogetherRL(api_key=stack.key, base_url=self.server.base_url) as client:
            while pending and time.monotonic() < deadline:
                for ident in sorted(pending):
                    try:
                        if ident in sent:
                            session = client.get_training_session(ident)
                        else:
                            session = client.stop_training_session(ident)
                            sent.add(ident)
                    except Exception:  # a fault still armed: the user tries again
                        continue
                    if short(str(session.status)) not in ("CREATING", "RUNNING", "STOPPING"):
                        pending.discard(ident)
                time.sleep(0.2)
        with report.lock:
            report.notes.append(
                f"{stack.label}: the user stopped {', '.join(sorted(theirs))}, left for them to decide and "
                "claimed by nobody, as the destroy's error said"
            )

    # ---------------------------------------------------------------------------------------- one cycle

    def run_cycle(self, plan: Plan) -> Report:
        try:
            if plan.runner is not None:  # this process reads the journal where the runners' providers find it
                os.environ[location.ENV_URL] = location.sibling(self.bucket_of(plan).url)
            return self._run_cycle(plan)
        finally:
            os.environ.pop(location.ENV_URL, None)

    def _run_cycle(self, plan: Plan) -> Report:
        report = Report(plan)
        started = time.monotonic()
        rule_ids = self.arm(plan)
        labels = [label for label, _ in plan.rules]
        pause = plan.runner is not None and plan.runner.interrupt == "pause"
        if pause:  # two runners of one stack
            stacks = [Stack(self, plan, "a", runner=1), Stack(self, plan, "a", runner=2)]
        else:
            stacks = [Stack(self, plan, "a", runner=1 if plan.runner else 0)]
            stacks += [Stack(self, plan, "b")] if plan.stacks == 2 else []
        killer = None
        if plan.kill:
            kill_rule = rule_ids[labels.index("kill-latency")] if plan.kill[1] == "post" else None
            killer = Killer(self, stacks[0], plan, kill_rule)
            killer.start()
        colleague = Colleague(self, plan, stacks, killer) if plan.colleague else None
        if colleague is not None:
            colleague.start()
        try:
            try:
                if plan.backends:
                    converged = self.cross_backend_ups(plan, stacks, report, killer)
                elif pause:
                    converged = self.two_runner_ups(plan, stacks, report)
                else:
                    converged = each(
                        stacks,
                        lambda s: self.up_phase(
                            plan, s, report, killer if s is stacks[0] else None, first=True
                        ),
                    )
            finally:
                if killer is not None:
                    killer.stop.set()
                    killer.join(timeout=10)
            if plan.deadline == "create":  # the capacity queue was long for the first up phase only
                report.queue_until = self.control.now()
                self.control.configure(timings={"session_creating": plan.deadline_restore})
            self.audit_up(plan, stacks, report, converged)
            self.check_backends(plan, stacks, report)
            for stack, ok in zip(stacks, converged, strict=True):
                stack.outcome = "converged" if ok else "UNCONVERGED"
            if plan.deadline and converged[0]:
                converged[0] = self.deadline_phase(plan, stacks[0], report)
                self.audit_up(plan, stacks, report, converged)
                stacks[0].outcome += f", deadline {plan.deadline} " + (
                    ("ran" if report.deadline_ran else "did not run")
                    + (", converged" if converged[0] else ", UNCONVERGED")
                )
            if converged[0] and plan.oob_stop:
                report.oob_done = self.oob_stop(plan, stacks[0], report)
                converged[0] = self.up_phase(plan, stacks[0], report, None, first=False)
                self.audit_up(plan, stacks, report, converged)
                stacks[0].outcome += ", re-up " + ("converged" if converged[0] else "UNCONVERGED")
            if colleague is not None:
                colleague.finish()
                if not plan.colleague_late:
                    colleague.stop_sessions()
            running = [s for s in stacks if not s.gone]  # two runners: the frozen one's job is over
            report.destroy_began = self.control.now()
            destroyed = dict(
                zip(
                    (s.tag for s in running),
                    each(running, lambda s: self.destroy_phase(plan, s, report, colleague)),
                    strict=True,
                )
            )
            self.audit_billed(stacks, report, "after its destroy")
            cleared = dict(
                zip(
                    (s.tag for s in running),
                    self.cleared_phase(plan, running, report),
                    strict=True,
                )
            )
            places = {f"engine state of {s.label}": s.state_dump() for s in stacks}
            if plan.runner is not None:
                places["create journal in the bucket"] = self.bucket_text(plan)
                # The case ran as planned only if the providers found the journal beside the state.
                report.journal_in_bucket = (
                    f"{location.SIBLING}/entries/" in places["create journal in the bucket"]
                )
            self.finish(plan, report, stacks, places)
        finally:
            if colleague is not None:
                colleague.finish()
                report.notes += colleague.said
                colleague.close()
            self.disarm()
        if plan.kill:
            stacks[0].outcome += ", provider killed" if report.kills else ", the planned kill never came"
        if plan.takeover_kill:
            stacks[0].outcome += (
                ", killed during the take-over" if report.takeover_kills else ", no take-over kill"
            )
        for stack in stacks:
            stack.outcome += "" if destroyed.get(stack.tag, True) else ", DESTROY FAILED"
            stack.outcome += "" if cleared.get(stack.tag, True) else ", STILL FAILING WITH FAULTS CLEARED"
        report.outcome = "; ".join(f"{s.tag}: {s.outcome}" for s in stacks)
        report.seconds = time.monotonic() - started
        return report

    def deadline_phase(self, plan: Plan, stack: Stack, report: Report) -> bool:
        """The deadline case, once the first up phase converged (what it returns: whether the stack's ups still
        converge). Every session declares ``stack.stop_after``; ``report.deadline_ran`` says whether the moment came
        as planned (what the figures count).

        * create: the sessions waited in a capacity queue longer than their deadline (a time a few seconds
          ahead), so each create waited until it and stopped what it made: the state holds them stopped.
        * outage: the sessions run; every endpoint goes down (503/500, every key) before their deadline (a time
          a few seconds ahead) until shortly after it, an ``up`` runs meanwhile, then the up phase again.
        * refresh: the sessions run with a duration; the API's clock moves past it (this machine's does not: no
          diff sees it due); a ``pulumi refresh`` (which stops nothing), an out-of-band stop of one of them, a
          ``pulumi refresh`` again (which keeps it in the state, stopped), then the up phase: nothing re-created."""
        held = stack.held()
        sessions = [held[name] for name, _d, _r in plan.declared_sessions() if name in held]
        state = self.control.state()
        objects = {o["id"]: o for o in state["training_sessions"]}
        if plan.deadline == "create":
            stopped = [i for i in sessions if i in objects and not active(objects[i])]
            stops = {
                m.group(2)
                for r in self.control.requests()
                if r["method"] == "POST" and r["key"] == stack.digest and (m := STOP_PATH.match(r["path"]))
            }
            report.deadline_ran = bool(sessions) and all(i in stops for i in stopped) and stopped == sessions
            if not report.deadline_ran:
                seen = ", ".join(
                    f"{i} {short(objects[i]['status']) if i in objects else 'unknown'}" for i in sessions
                )
                with report.lock:
                    report.notes.append(
                        f"deadline create: not every session held was stopped by the stack (not counted): {seen}"
                    )
            return True
        if plan.deadline == "outage":
            at = parse_time(stack.stop_after or "")
            running = all(i in objects and active(objects[i]) for i in sessions)
            left = (at - utcnow()).total_seconds()
            if not sessions or not running or left < 0.5:
                with report.lock:
                    report.notes.append("deadline outage: the deadline came before the outage (not counted)")
                return True
            self.control.add_fault(
                path=ANY_PATH,
                status=plan.outage_status,
                times=None,
                duration=round(left + plan.outage_tail, 2),
                seed=plan.seed * 1000 + plan.cycle,
            )
            over = time.monotonic() + left + plan.outage_tail
            time.sleep(max(0.0, left) + 0.3)
            report.deadline_ran = True
            during, _errors = self.timed_up(plan, stack, report, "up (outage past the deadline)")
            with report.lock:
                report.notes.append(
                    "deadline outage: the up begun past the deadline during the outage "
                    + (
                        "succeeded (its requests got through once the outage was over)"
                        if during
                        else "failed"
                    )
                )
            time.sleep(max(0.0, over - time.monotonic()) + 0.1)
            return self.up_phase(plan, stack, report, None, first=False)
        # refresh
        if not sessions:
            return True
        self.advance(report, DEADLINE_ADVANCE)
        for _ in range(TRIES):
            if self.command(report, stack, "refresh", lambda errs: self.refresh(stack))[0]:
                break
        victim = held.get(plan.sessions[plan.oob_index][0]) or sessions[0]
        stopped = False
        for _ in range(
            TRIES
        ):  # someone stops it past its deadline, through the same (faulted) API, until it is
            try:  # (an ignored stop answers 200 and does nothing: they see it still running and stop it again)
                with TogetherRL(api_key=KEYS["oob"], base_url=self.server.base_url) as client:
                    client.stop_training_session(victim)
                report.oob_done = True
            except Exception as exc:
                with report.lock:
                    report.errors.append(f"out-of-band stop: {exc}")
                continue
            ending = (*SESSION_ACTIVE, "STOPPING")
            if self.settled(victim, "training_sessions", ending, timeout=5) not in ending:
                stopped = True
                break
        for _ in range(TRIES):
            if self.command(report, stack, "refresh", lambda errs: self.refresh(stack))[0]:
                break
        converged = self.up_phase(plan, stack, report, None, first=False)
        report.deadline_ran = stopped and victim in stack.held().values()  # kept in the state, stopped
        if not report.deadline_ran:
            with report.lock:
                report.notes.append(
                    f"deadline refresh: {victim} was "
                    + ("not held after the up (not counted)" if stopped else "never stopped (not counted)")
                )
        return converged

    def two_runner_ups(self, plan: Plan, stacks: list[Stack], report: Report) -> list[bool]:
        """Two runners of one stack: runner 1's ``up``, its machine frozen (SIGSTOP of its provider) once its
        model resource's create has recorded the id and waits for READY; runner 2's up phase meanwhile (its create
        of that declaration meets runner 1's lease, waits for it to run out, then takes the object over by id);
        then runner 1 wakes up: a straggler whose lease was taken over, whose create must fail without marking
        anything done or stopping anything. Runner 1's job is then over (its machine thrown away): runner 2's
        state is the stack's, and it destroys it. (Pulumi's stack lock keeps two ups of one stack apart;
        this is what is left when it is cancelled while the frozen runner still lives.)"""
        first, second = stacks
        pauser = Pauser(first)
        outcome: list[bool] = []
        straggler = threading.Thread(
            target=lambda: outcome.append(
                self.command(report, first, "up", lambda errs: self.up(plan, first, report, errs))[0]
            ),
            name="chaos-runner-1",
            daemon=True,
        )
        pauser.start()
        straggler.start()
        if not pauser.paused.wait(timeout=60):
            pauser.stop.set()
            straggler.join(timeout=120)
            with report.lock:
                report.notes.append("two runners: runner 1 was never frozen (the case did not run)")
            second.gone = True  # runner 1's state is the stack's: it destroys it
            return [outcome[0] if outcome else False, False]
        converged = self.up_phase(plan, second, report, None, first=True)
        pauser.wake()
        straggler.join(timeout=120)
        first.gone = True
        first.throw_away()
        lost = [line for line in report.error_lines if "lost its create journal lease" in line]
        with report.lock:
            report.paused = True
            report.straggler_lost = bool(lost)
        self.audit_taken(report, stacks)
        return [outcome[0] if outcome else False, converged]

    def cross_backend_ups(
        self, plan: Plan, stacks: list[Stack], report: Report, killer: Killer | None
    ) -> list[bool]:
        """Two stacks of the same names in two backends, on one machine: the first stack's first ``up`` (killed,
        or failed, sometimes), then the second stack's whole up phase, with the first one's entries left in the
        shared create journal, then the first stack's re-runs."""
        second: list[bool] = []
        first = self.up_phase(
            plan,
            stacks[0],
            report,
            killer,
            first=True,
            between=lambda: second.append(self.up_phase(plan, stacks[1], report, None, first=True)),
        )
        return [first, *second]

    def check_backends(self, plan: Plan, stacks: list[Any], report: Report) -> None:
        """Cross-backend: whether the case ran as planned (counted only then): the create journal holds entries of
        the same owner from both stacks, each with its own stack's backend."""
        if not plan.backends:
            return
        entries = [s.entry for s in journal_entries(report.since)]
        owners = [{e.owner for e in entries if e.owner and stack.owns(e)} for stack in stacks]
        if owners[0] & owners[1]:
            report.backends_seen = True
        else:
            with report.lock:
                report.notes.append(
                    "cross-backend: the journal holds no owner both stacks wrote entries of (not counted as run)"
                )

    def oob_stop(self, plan: Plan, stack: Stack, report: Report) -> bool:
        """Someone stops one object outside Pulumi (through the same, faulted, API, with a key of their own)."""
        try:
            with TogetherRL(api_key=KEYS["oob"], base_url=self.server.base_url) as client:
                if plan.oob_stop == "resource":
                    client.stop_model_resource(stack.held()[plan.resource_names()[0]], force=True)
                else:
                    client.stop_training_session(stack.held()[plan.sessions[plan.oob_index][0]])
            return True
        except Exception as exc:  # the other person's stop failed: the second up runs all the same
            with report.lock:
                report.errors.append(f"out-of-band stop: {exc}")
            return False

    # ---------------------------------------------------------------------------------------- audits

    def finish(self, plan: Plan, report: Report, stacks: list[Any], places: dict[str, str]) -> None:
        """The audits after the last destroy (the cleared phase's): billed objects, duplicates, healthy objects
        stopped, leaks; and the faults that fired."""
        state = self.audit_billed(stacks, report, "after the destroy with every fault cleared")
        creators = state["created_with"]
        self.audit_duplicates(plan, stacks, state, report)
        self.audit_recreated(plan, stacks, state, report)
        requests = self.control.requests()
        report.evidence = {
            "emulator state.json": json.dumps(state, indent=1),
            "request log.json": json.dumps(requests, indent=1),
        }
        self.audit_stops(stacks, state, requests, report)
        report.colleague_made = sum(1 for digest in creators.values() if digest == DIGESTS["colleague"])
        report.session_acts = sum(
            1
            for r in requests
            if r["method"] == "POST"
            and r["path"] == SESSIONS
            and r["fault"]
            and r.get("handler_status") == 200  # the handler ran and made the session
            and r["status"] in (500, 503)
        )
        if not report.disarmed:
            report.poisoned = self.poisoned_lists(plan)
        report.faults += self.count_faults(plan, state, requests, report)
        self.audit_leaks(report, {**places, "request log": json.dumps(requests)})

    def audit_billed(self, stacks: list[Any], report: Report, when: str) -> dict[str, Any]:
        """Billed after destroy: an active object made by a stack's key once its destroy is over (``when``: the
        destroy phase's, whose last try runs with every fault cleared, and again the cleared phase's), apart from
        what was left for the user. Returns the emulator's state it read."""
        state = self.control.state()
        creators = state["created_with"]
        mine = {s.digest for s in stacks} | {None}
        # A session left for the user keeps its model resource from being stopped (the destroy refuses to stop
        # sessions it does not manage): that resource waits for the user's decision too.
        for session in state["training_sessions"]:
            resource = next(
                (o for o in state["model_resources"] if o["id"] == session["model_resources_id"]), None
            )
            if session["id"] in report.left and active_session(session) and resource and active(resource):
                report.find(
                    report.left,
                    resource["id"],
                    f"left for the user to decide (not a failure): model resource {resource['id']}, made by "
                    f"{who(creators.get(resource['id']))}, is {short(resource['status'])}: its destroy is refused "
                    f"while training session {session['id']}, left for the user, is attached",
                )
        for obj in (*state["model_resources"], *state["training_sessions"]):
            ident = obj["id"]
            if active(obj) and creators.get(ident) in mine and ident not in report.left:
                report.find(
                    report.billed,
                    ident,
                    f"billed after destroy: {kind_of(obj)} {ident} ({obj.get('display_name') or '-'}), made by "
                    f"{who(creators.get(ident))}, is {short(obj['status'])} {when}",
                )
        return state

    def audit_up(self, plan: Plan, stacks: list[Any], report: Report, converged: list[bool]) -> None:
        """The audits after an up phase (every stack's, joined): left for the user, orphans, lost state, taken.
        A stack's state is ``held()`` {name: id} and ``pending()`` (replaced ones still waiting for their
        delete: the state holds them too)."""
        state = self.control.state()
        creators = state["created_with"]
        objects = [*state["model_resources"], *state["training_sessions"]]
        known = {o["id"]: o for o in objects}
        held = {stack.tag: stack.held() for stack in stacks}
        by_tag = {stack.tag: stack for stack in stacks}
        ids = {i for stack in stacks for i in (*held[stack.tag].values(), *stack.pending())}
        with report.lock:
            report.gone_taken |= {i for i, tag in report.gone_left.items() if i in held.get(tag, {}).values()}
        for digest, ident in sorted(report.left_named):
            obj = known.get(ident)
            if obj is not None and active(obj) and creators.get(ident) == digest and ident not in ids:
                report.find(
                    report.left,
                    ident,
                    f"left for the user to decide (not a failure): {kind_of(obj)} {ident}, made by {who(digest)}, "
                    f"is {short(obj['status'])}: the user dismissed the journal entry that named it among "
                    "look-alikes none of which could be proven the stack's",
                )
        open_entries = [s for s in journal_entries(0.0) if s.entry.state in (State.INTENT, State.POSTING)]
        for digest, tag, ident in sorted(report.named):
            obj = known.get(ident)
            if obj is None or not active(obj) or creators.get(ident) != digest or ident in ids:
                continue
            if (digest, ident) in report.left_named or ident in report.left:
                continue
            entry = next((s for s in open_entries if by_tag[tag].owns(s.entry)), None)
            if entry is not None:  # recorded, named to the user: what a next try would ask them to decide
                report.find(
                    report.left,
                    ident,
                    f"left for the user to decide (not a failure): {kind_of(obj)} {ident}, made by {who(digest)}, "
                    f"is {short(obj['status'])}: the last try's error named it among look-alikes none of which "
                    f"could be proven the stack's, and the create journal still records it (entry "
                    f"{entry.name}: `journal list` shows it)",
                )
        for obj in objects:
            ident = obj["id"]
            if not active(obj) or ident in ids or ident in report.left:
                continue
            if creators.get(ident) == DIGESTS["colleague"]:
                continue  # the colleague's own: no stack's to hold
            report.find(
                report.orphans,
                ident,
                f"orphan: {kind_of(obj)} {ident} ({obj.get('display_name') or '-'}), made by "
                f"{who(creators.get(ident))}, is {short(obj['status'])} and no state holds it",
            )
        seen: dict[str, str] = {}
        api_now = self.control.now() if plan.deadline else None
        for stack, ok in zip(stacks, converged, strict=True):
            for name, ident in held[stack.tag].items():
                obj = known.get(ident)
                key = f"{stack.tag}:{name}={ident}"
                # Past its deadline, a refresh keeps a stopped object in the state (docs/cost.md: so that no `up`
                # re-creates it): not lost state.
                deadline_at = None if obj is None or api_now is None else self.deadline_of(stack, obj)
                kept = deadline_at is not None and api_now is not None and deadline_at <= api_now
                if obj is None:
                    report.find(
                        report.lost,
                        key,
                        f"lost state: {stack.label}'s {name} holds {ident}, which the API does not know",
                    )
                elif not active(obj) and not kept:
                    report.find(
                        report.lost,
                        key,
                        f"lost state: {stack.label}'s {name} holds {ident}, which is "
                        f"{short(obj['status'])} (the up's refresh should have dropped it)",
                    )
                if ident in seen:
                    report.find(
                        report.lost,
                        key,
                        f"lost state: {stack.label}'s {name} and {seen[ident]} both hold {ident}",
                    )
                seen[ident] = f"{stack.label}'s {name}"
            if ok:
                for name in (*plan.resource_names(), *(s[0] for s in plan.declared_sessions())):
                    if name not in held[stack.tag]:
                        report.find(
                            report.lost,
                            f"{stack.tag}:{name}",
                            f"lost state: {stack.label}'s {name} is declared, the up succeeded, and the state "
                            "does not hold it",
                        )
        self.audit_taken(report, stacks, state)

    def audit_overrun(
        self, plan: Plan, stack: Stack, report: Report, began: datetime, began_api: datetime
    ) -> None:
        """Ran past its deadline: after an ``up`` of ``stack`` that succeeded (begun at ``began`` on this machine's
        clock, ``began_api`` on the API's), a session the stack's key made (any, held or not) still CREATING or
        RUNNING although (a) its deadline had passed on both clocks :data:`DEADLINE_BOUND` before the ``up``
        began (its diff, on this machine's clock, must have seen it due, and its update stopped it), or (b) this
        ``up`` created it in the create case's capacity queue, so that it could not be RUNNING by its deadline,
        and the ``up`` ended :data:`DEADLINE_BOUND` past it (the create's wait, on the API's clock, must have
        stopped it). What only the API's clock has passed (the campaign moved it) no diff can see: not judged."""
        state = self.control.state()
        ended_api = self.control.now()
        bound = timedelta(seconds=DEADLINE_BOUND)
        for obj in state["training_sessions"]:
            if state["created_with"].get(obj["id"]) != stack.digest or not active(obj):
                continue
            if obj["id"] in report.left or (stack.digest, obj["id"]) in report.left_named:
                continue  # no create could prove it the stack's, so no state holds its deadline: the user decides
            at = self.deadline_of(stack, obj)
            if at is None:
                continue
            created = parse_time(obj["created_at"])
            queued = plan.deadline == "create" and (
                report.queue_until is None or created < report.queue_until
            )
            overdue = at + bound <= began and at <= began_api
            waited = queued and created >= began_api and at + bound <= ended_api
            if overdue or waited:
                report.find(
                    report.overran,
                    obj["id"],
                    f"ran past its deadline: training session {obj['id']} ({obj.get('display_name')}), made by "
                    f"{stack.label}, is {short(obj['status'])} after an `up` that "
                    + (
                        f"began past its deadline ({rfc3339(at)})"
                        if overdue
                        else f"created it and waited past its deadline ({rfc3339(at)})"
                    ),
                )

    def audit_recreated(self, plan: Plan, stacks: list[Any], state: dict[str, Any], report: Report) -> None:
        """Re-created after its deadline: before the destroy phase, a declared session got an object of the
        stack's key created once an earlier object of that declaration had reached its deadline still active
        (so stopped at it, or past it), while the stop_after declared was the same for both (not moved)."""
        if not plan.deadline or report.destroy_began is None:
            return
        t = plan.timings
        slack = timedelta(seconds=t["session_stopping"])
        for stack in stacks:
            mine: dict[str, list[dict[str, Any]]] = {}
            for obj in state["training_sessions"]:
                if state["created_with"].get(obj["id"]) == stack.digest and self.deadline_of(stack, obj):
                    if parse_time(obj["created_at"]) < report.destroy_began:
                        mine.setdefault(obj.get("display_name") or "", []).append(obj)
            for objects in mine.values():
                objects.sort(key=lambda o: parse_time(o["created_at"]))
                for j, later in enumerate(objects):
                    made = parse_time(later["created_at"])
                    for earlier in objects[:j]:
                        at = self.deadline_of(stack, earlier)
                        assert at is not None
                        status = short(earlier["status"])
                        changed = parse_time(earlier["updated_at"])
                        end = (
                            None
                            if active(earlier)
                            else changed - (slack if status == "STOPPED" else timedelta(0))
                        )
                        same = self.declared_at(stack, made) == self.declared_at(
                            stack, parse_time(earlier["created_at"])
                        )
                        if made >= at and (end is None or end >= at) and same:
                            report.find(
                                report.recreated,
                                later["id"],
                                f"re-created after its deadline: training session {later['id']} "
                                f"({later.get('display_name')}) was made by {stack.label} at {later['created_at']}, "
                                f"after {earlier['id']}, made for it too, reached its deadline ({rfc3339(at)}), "
                                f"with stop_after unchanged ({self.declared_at(stack, made)})",
                            )

    def audit_taken(self, report: Report, stacks: list[Any], state: dict[str, Any] | None = None) -> None:
        """Taken from another owner: an id a stack's state holds whose object another key made (apart from the
        one race no answer of the API can tell apart, :meth:`indistinguishable`, counted on its own)."""
        state = state or self.control.state()
        creators = state["created_with"]
        known = {o["id"]: o for o in (*state["model_resources"], *state["training_sessions"])}
        requests: list[dict[str, Any]] | None = None
        for stack in stacks:
            entries = [
                *stack.held().items(),
                *(("(a replaced one, pending delete)", i) for i in stack.pending()),
            ]
            for name, ident in entries:
                if ident in creators and creators[ident] != stack.digest:
                    requests = self.control.requests() if requests is None else requests
                    race = self.indistinguishable(stack.digest, creators[ident], known.get(ident), requests)
                    if race is not None:
                        report.find(
                            report.unprovable,
                            f"{stack.tag}:{ident}",
                            f"taken, indistinguishable (not a failure): {stack.label}'s {name} holds {ident}, "
                            f"which {who(creators[ident])} made with the same request {race}",
                        )
                        continue
                    report.find(
                        report.taken,
                        f"{stack.tag}:{ident}",
                        f"taken from another owner: {stack.label}'s {name} holds {ident}, which "
                        f"{who(creators[ident])} made",
                    )

    def audit_engine_death(self, report: Report, stack: Stack, process: ProviderUnderEngine) -> None:
        """After a command whose engine was killed and left a zombie: the provider must have seen the engine gone
        and exited on its own (while the engine was still a zombie), and marked done no create after the kill
        (the answer reached nobody: the next ``up`` would make it again). What it left for the next run (its
        entries with ``lifeline.GONE_NOTE`` and their ids) is noted, to see that run take it over."""
        pid, killed = process.provider_pid, process.engine_killed
        assert killed is not None
        with report.lock:
            report.engine_kills += 1
        if not process.exited_alone:
            report.find(
                report.unnoticed,
                f"{stack.tag}:{pid}:running",
                f"engine death unnoticed: {stack.label}'s provider (pid {pid}) still ran {ENGINE_EXIT_BOUND:g} s "
                f"after its engine (pid {process.engine_pid}) was SIGKILLed and left unreaped (a zombie); the "
                "campaign killed it",
            )
        elif process.engine_state_at_exit != "Z":
            with report.lock:
                report.notes.append(
                    f"{stack.label}: the engine (pid {process.engine_pid}) was no longer a zombie when the "
                    f"provider exited (state {process.engine_state_at_exit}): not counted as a zombie case"
                )
        else:
            with report.lock:
                report.zombies_seen += 1
        held = set(stack.held().values()) | stack.pending()
        for seen in journal_entries(killed):  # written since the kill
            entry = seen.entry
            if entry.process is None or entry.process.pid != pid:
                continue
            if entry.state == State.DONE and entry.id not in held:
                report.find(
                    report.unnoticed,
                    f"{stack.tag}:{seen.name}",
                    f"engine death unnoticed: {stack.label}'s provider (pid {pid}) marked its create of "
                    f"{entry.kind} {entry.id} done after its engine was killed (entry {seen.name}): the "
                    "answer reached nobody, and the next `pulumi up` cannot take it over",
                )
            elif entry.note == lifeline.GONE_NOTE and entry.id:
                with report.lock:
                    report.gone_left[entry.id] = stack.tag

    @staticmethod
    def indistinguishable(
        digest: str, maker: str, obj: dict[str, Any] | None, requests: list[dict[str, Any]]
    ) -> str | None:
        """The limit client/reconcile.py documents, checked from the emulator's request log: another key's create
        of the very same request made ``obj`` after the stack's last list before its own POST and before that
        POST arrived, and the stack's POST failed without acting. The API answers both keys alike (the same user,
        ``created_by=me``) and takes no idempotency key: nothing it says tells the two creates apart. Returns
        how it happened, or None when anything else explains it."""
        if obj is None:
            return None
        collection = (
            "/v1/rl/model-resources" if kind_of(obj) == "model resource" else "/v1/rl/training-sessions"
        )
        made = parse_time(obj["created_at"])
        theirs = [
            r
            for r in requests
            if r["method"] == "POST"
            and r["path"] == collection
            and r["key"] == maker
            and parse_time(r["at"]) <= made
        ]
        if not theirs:
            return None
        body = theirs[-1].get("body")
        for i, mine in enumerate(requests):
            sent = parse_time(mine["at"])
            if not (
                mine["method"] == "POST"
                and mine["path"] == collection
                and mine["key"] == digest
                and mine.get("body") == body
                and not mine["handled"]  # refused before the handler ran: it made nothing
                and sent >= made
            ):
                continue
            lists = [
                r
                for r in requests[:i]
                if r["method"] == "GET" and r["path"] == collection and r["key"] == digest and r["handled"]
            ]
            if lists and parse_time(lists[-1]["at"]) < made:
                return (
                    f"{(sent - made).total_seconds() * 1000:.0f} ms before the stack's own POST arrived (which "
                    f"failed with {mine['status'] or 'no answer'} without acting), after the stack's last list"
                )
        return None

    def audit_duplicates(self, plan: Plan, stacks: list[Any], state: dict[str, Any], report: Report) -> None:
        t = plan.timings
        creators = state["created_with"]
        mine = {s.digest for s in stacks}
        declared: dict[str, int] = {}  # display name -> how many sessions the stack declares with it
        for _name, display, _rank in plan.declared_sessions():
            declared[display] = declared.get(display, 0) + 1
        resources = len(plan.resource_names())
        groups: dict[tuple[str, str], list[tuple[datetime, datetime | None, str]]] = {}
        resource_slack = timedelta(seconds=max(t["resource_stopping"], t["session_stopping"]))
        session_slack = timedelta(seconds=t["session_stopping"])
        for kind, objects in (
            ("resource", state["model_resources"]),
            ("session", state["training_sessions"]),
        ):
            for obj in objects:
                maker = creators.get(obj["id"])
                if maker not in mine or obj["id"] in report.left or (maker, obj["id"]) in report.left_named:
                    continue  # the colleague's, or one the user chose to leave (its own figure, or taken)
                status = short(obj["status"])
                start, changed = parse_time(obj["created_at"]), parse_time(obj["updated_at"])
                if status in (RESOURCE_ACTIVE if kind == "resource" else SESSION_ACTIVE):
                    end = None
                elif status == "STOPPED":
                    end = max(start, changed - (resource_slack if kind == "resource" else session_slack))
                else:  # STOPPING, ERROR, EXPIRED: entered at updated_at
                    end = changed
                if kind == "resource":
                    group = "the model resource"
                else:
                    display = obj.get("display_name") or ""
                    if display not in declared:
                        report.find(
                            report.duplicates,
                            obj["id"],
                            f"duplicate: training session {obj['id']} ({display or '-'}), made by {who(maker)}, "
                            "matches no declared session",
                        )
                        continue
                    group = f"session {display}"
                groups.setdefault((maker, group), []).append((start, end, obj["id"]))
        for (maker, group), objects in groups.items():
            allowed = resources if group == "the model resource" else declared[group.split(" ", 1)[1]]
            objects.sort(key=lambda o: o[0])
            for i, (start, _end, ident) in enumerate(objects):
                overlapping = [o[2] for o in objects[:i] if o[1] is None or o[1] > start]
                if len(overlapping) >= allowed:
                    report.find(
                        report.duplicates,
                        ident,
                        f"duplicate: {ident} was made by {who(maker)} for {group} while "
                        f"{', '.join(overlapping)} (made for it too) {'were' if len(overlapping) > 1 else 'was'} "
                        f"still active ({allowed} declared)",
                    )

    def audit_stops(
        self, stacks: list[Any], state: dict[str, Any], requests: list[dict[str, Any]], report: Report
    ) -> None:
        """Healthy objects stopped: see the module docstring for what explains a stop."""
        creators = state["created_with"]
        known = {o["id"]: o for o in (*state["model_resources"], *state["training_sessions"])}
        # Two runners of one stack share its key: a stop that key sent is either runner's, and is explained by a
        # change of either (the request log cannot tell two machines of one key apart).
        by_digest: dict[str, list[Any]] = {}
        for each_stack in stacks:
            by_digest.setdefault(each_stack.digest, []).append(each_stack)
        stops = []
        for r in requests:
            match = STOP_PATH.match(r["path"]) if r["method"] == "POST" else None
            if match:
                stops.append((parse_time(r["at"]), match.group(2), r.get("key"), r))
        out_of_band = [(at, ident) for at, ident, key, _ in stops if key == DIGESTS["oob"]]
        timed_out = {i for text in report.errors for i in TIMED_OUT.findall(text)}
        for at, ident, sender, r in stops:
            if sender == DIGESTS["oob"]:
                continue  # the injected out-of-band stop itself
            obj = known.get(ident)
            maker = creators.get(ident)
            if obj is None:
                report.notes.append(
                    f"a stop of {ident}, which the API does not know, by {who(sender)} at {r['at']}"
                )
                continue
            what = f"{kind_of(obj)} {ident} ({obj.get('display_name') or '-'}, {short(obj['status'])} now)"
            if sender != maker:
                report.find(
                    report.healthy,
                    ident,
                    f"healthy object stopped: {what}, made by {who(maker)}, was stopped by {who(sender)} at "
                    f"{r['at']} (HTTP {r['status']})",
                )
                continue
            senders = by_digest.get(sender or "")
            if senders is None:
                continue  # the colleague stopping his own
            related = {ident} | ({obj["model_resources_id"]} if "model_resources_id" in obj else set())
            here = self.on_this_machine(report, at)  # the engines' windows are on this machine's clock
            if any(start <= here <= end for one in senders for start, end in getattr(one, "refreshes", ())):
                report.find(
                    report.healthy,
                    ident,
                    f"healthy object stopped: {what}, made by {' or '.join(one.label for one in senders)}, was "
                    f"stopped by it at {r['at']} (HTTP {r['status']}) during a `pulumi refresh`, which stops nothing",
                )
                continue
            if any(
                start <= here <= end and ident in ids for one in senders for start, end, ids in one.changes
            ):
                continue  # that stack's destroy, replacement or removal of it
            deadlines = [d for one in senders if (d := self.deadline_of(one, obj)) is not None]
            if deadlines and min(deadlines) <= at:
                continue  # its deadline had passed (the API's clock): a create's wait or an up stopped it
            if any(short(known[i]["status"]) == "ERROR" for i in related if i in known):
                continue  # an injected fail-next, on it or on its model resource
            if ident in timed_out:
                continue  # the create-timeout fault
            if ident in report.user_stopped:
                continue  # left for the user to decide, and the user stopped it
            if any(when <= at and i in related for when, i in out_of_band):
                continue  # it, or its model resource, was stopped out of band before
            report.find(
                report.healthy,
                ident,
                f"healthy object stopped: {what}, made by {' or '.join(one.label for one in senders)}, was stopped "
                f"by it at {r['at']} "
                f"(HTTP {r['status']}) with no change of that stack and no fault on it to explain it",
            )

    def count_faults(
        self, plan: Plan, state: dict[str, Any], requests: list[dict[str, Any]], report: Report
    ) -> int:
        fired = report.fired + sum(rule["fired"] for rule in self.control.faults())
        known = {o["id"] for o in (*state["model_resources"], *state["training_sessions"])}
        errored = sum(
            1
            for obj in (*state["model_resources"], *state["training_sessions"])
            if (obj.get("error") or {}).get("message") == plan.message
            # not one the campaign spent a fail-next on (Campaign.spend_fail_next): it hit no stack
            and state["created_with"].get(obj["id"]) != DIGESTS["oob"]
        )
        lagged = 0
        if plan.settings.get("read_lag"):
            for r in requests:
                parts = r["path"].rstrip("/").split("/")
                if r["status"] == 404 and not r["fault"] and any(p in known for p in parts):
                    lagged += 1
        listed = int(
            bool(plan.settings.get("list_lag"))
            and any(r["method"] == "GET" and re.match(CREATES, r["path"]) for r in requests)
        )
        if report.stops_left is None:
            report.stops_left = self.control.settings()["stops_ignored"]
        ignored = int(plan.settings.get("stops_ignored", 0)) - int(report.stops_left)
        timed_out = len({i for text in report.errors for i in TIMED_OUT.findall(text)})
        return (
            fired
            + errored
            + lagged
            + listed
            + max(0, ignored)
            + int(report.oob_done)
            + report.kills
            + report.takeover_kills
            + timed_out
            + report.poisoned
        )

    def audit_leaks(self, report: Report, extra: dict[str, str]) -> None:
        places = dict(extra)
        places["provider output"] = "\n".join(report.outputs)
        places["error messages"] = "\n".join(report.errors)
        texts = []
        # The campaign's journal folder, and what is left of the runners' machines (their local folders).
        for path in sorted(
            p for folder in (self.state_dir, *self.tmp.glob("runner-*")) for p in folder.rglob("*")
        ):
            if path.is_file():
                texts.append(path.read_text(errors="replace"))
        places["create journal"] = "\n".join(texts)
        for place, text in places.items():
            roles = [role for role in ROLES if KEYS[role] in text or KEY_CORES[role] in text]
            if roles:
                report.find(
                    report.leaks, place, f"key leak: the API key of {', '.join(roles)} appears in the {place}"
                )


def run_all(items: list[Any], action: Callable[[Any], Any]) -> list[tuple[Any, BaseException | None]]:
    """``action(item)`` for every item at once: [(result, None) or (None, exception)], in order."""

    def one(item: Any) -> tuple[Any, BaseException | None]:
        try:
            return action(item), None
        except Exception as exc:
            return None, exc

    if len(items) == 1:
        return [one(items[0])]
    with ThreadPoolExecutor(max_workers=len(items)) as pool:
        return list(pool.map(one, items))


# ------------------------------------------------------------------------------------------------- interrupts


class Killer(threading.Thread):
    """SIGKILLs the stack's provider once the planned create is in flight (its wait, or its POST)."""

    def __init__(self, campaign: Campaign, stack: Stack, plan: Plan, rule_id: str | None):
        super().__init__(name="chaos-killer", daemon=True)
        assert plan.kill is not None
        self.campaign = campaign
        self.stack = stack
        self.kind, self.when = plan.kill
        self.delay = plan.kill_delay
        self.rule_id = rule_id
        self.fired = threading.Event()
        self.stop = threading.Event()
        self.counted = False
        self.since = time.time() - 1

    def run(self) -> None:
        control = EmulatorControl(self.campaign.server.base_url)
        seen: dict[str, float] = {}
        try:
            while not self.stop.is_set():
                process = self.stack.current()
                if process is not None and process.proc is not None and self.ready(control, seen, process):
                    time.sleep(self.delay)
                    if self.stack.kill(process):
                        self.fired.set()
                        self.stack.interrupt_over.set()
                        return
                time.sleep(0.02)
        finally:
            control.close()

    def ready(self, control: EmulatorControl, seen: dict[str, float], process: ProviderProcess) -> bool:
        if self.when == "wait":  # an object of this stack's key waiting to be READY / RUNNING
            state = control.state()
            mine = state["created_with"]
            if self.kind == "resource":
                objects, waiting = state["model_resources"], "PENDING"
            else:
                objects, waiting = state["training_sessions"], "CREATING"
            return any(
                short(o["status"]) == waiting and mine.get(o["id"]) == self.stack.digest for o in objects
            )
        # "post": an entry of that kind of this very process, sent and still without an id, for a quarter of the
        # injected latency.
        now = time.monotonic()
        if self.stack.case is not None:
            # A runner cycle: told by the emulator (the kill-latency rule, aimed at this stack's one POST, has
            # fired), not by the journal, so that a journal that is not where it should be is a finding, not a
            # kill that never came.
            if next((r["fired"] for r in control.faults() if r["id"] == self.rule_id), 0):
                return now - seen.setdefault("post", now) >= KILL_LATENCY / 4
            return False
        for found in journal_entries(self.since):
            entry = found.entry
            if (
                entry.kind == JOURNAL_KIND[self.kind]
                and entry.id is None
                and entry.sends
                and entry.process is not None
                and entry.process.pid == process.provider_pid
            ):
                first = seen.setdefault(found.key, now)
                if now - first >= KILL_LATENCY / 4:
                    return True
        return False


class TakeoverKiller(threading.Thread):
    """SIGKILLs the stack's provider while it takes an object over (once its "taking it over" line is out)."""

    def __init__(self, stack: Stack, delay: float):
        super().__init__(name="chaos-takeover-killer", daemon=True)
        self.stack = stack
        self.delay = delay
        self.fired = threading.Event()
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            process = self.stack.current()
            if process is not None and "taking it over" in process.stderr_text():
                time.sleep(self.delay)
                # The provider itself, even under an engine: a create that ends within the lifeline's look
                # (every 0.5 s) after its engine's death answers nobody, and the take-over may already be over.
                if self.stack.kill(process, engine=False):
                    self.fired.set()
                return
            time.sleep(0.02)


class Pauser(threading.Thread):
    """Two runners of one stack: freezes runner 1's provider (SIGSTOP: a machine that hangs, a VM paused) once its
    model resource's create has recorded the id in the shared journal; :meth:`wake` lets it go on (SIGCONT)."""

    def __init__(self, stack: Stack):
        super().__init__(name="chaos-pauser", daemon=True)
        self.stack = stack
        self.paused = threading.Event()
        self.stop = threading.Event()
        self.pid: int | None = None
        self.since = time.time() - 1

    def run(self) -> None:
        while not self.stop.is_set():
            process = self.stack.current()
            if process is not None and process.provider_pid is not None:
                for entry in (s.entry for s in journal_entries(self.since)):
                    if (
                        entry.kind == JOURNAL_KIND["resource"]
                        and entry.id is not None
                        and entry.state != State.DONE
                        and entry.process is not None
                        and entry.process.pid == process.provider_pid
                    ):
                        self.pid = process.provider_pid
                        os.kill(self.pid, signal.SIGSTOP)
                        self.paused.set()
                        return
            time.sleep(0.05)

    def wake(self) -> None:
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGCONT)


# ------------------------------------------------------------------------------------------------- the colleague


class Colleague(threading.Thread):
    """A colleague on the same account (his own key of the same user) who POSTs look-alike objects by hand:
    the same request as a declared resource or session, at a random moment, while a create of that request is
    in flight, or while one is interrupted. He never stops anything but his own sessions."""

    def __init__(self, campaign: Campaign, plan: Plan, stacks: list[Any], killer: Killer | None):
        super().__init__(name="chaos-colleague", daemon=True)
        self.campaign = campaign
        self.plan = plan
        self.stacks = stacks
        self.killer = killer
        self.done = threading.Event()
        self.said: list[str] = []  # what he did, for --verbose
        self.http = httpx.Client(
            base_url=campaign.server.base_url,
            headers={"Authorization": f"Bearer {KEYS['colleague']}", "User-Agent": "chaos-colleague/1.0"},
            timeout=15.0,
        )
        self.control = EmulatorControl(campaign.server.base_url)
        self._lock = threading.Lock()
        self.since = time.time() - 1

    def run(self) -> None:
        started = time.monotonic()
        pending = list(self.plan.colleague)
        seen: set[str] = set()
        try:
            while pending and not self.done.is_set():
                for look in list(pending):
                    kind, trigger, delay = look
                    body = self.trigger(kind, trigger, delay, started, seen)
                    if body is not None:
                        self.post(kind, trigger, body)
                        pending.remove(look)
                time.sleep(0.03)
        except Exception as exc:  # the colleague's own trouble ends his part, never the cycle
            self.said.append(f"colleague: {type(exc).__name__}: {exc}")

    def ours(self, entry: Entry) -> bool:
        """An entry of one of this cycle's stacks (the journal is the campaign's, across cycles)."""
        return bool(entry.owner) and any(f"/{stack.name}/" in str(entry.owner) for stack in self.stacks)

    def trigger(
        self, kind: str, trigger: str, delay: float, started: float, seen: set[str]
    ) -> dict[str, Any] | None:
        """The body to POST now for that look, or None (not yet)."""
        if trigger == "random":
            return self.declared_body(kind) if time.monotonic() - started >= delay else None
        entries = [
            s
            for s in journal_entries(self.since)
            if s.entry.kind == JOURNAL_KIND[kind] and self.ours(s.entry)
        ]
        if trigger == "inflight":  # a POST of that request sent, not answered (the colleague reads its body)
            for found in entries:
                entry = found.entry
                fresh = entry.sends and (utcnow() - max(entry.sends)).total_seconds() < 2
                if (
                    entry.state == State.POSTING
                    and fresh
                    and entry.answered_at is None
                    and entry.id is None
                    and found.key not in seen
                ):
                    seen.add(found.key)
                    return dict(entry.body)
            return None
        # "interrupted": just after the kill, the request the killed create was making
        if self.killer is None or not self.killer.fired.is_set():
            return None
        pid = self.killer.stack.killed_pid
        for entry in (s.entry for s in entries):
            if entry.process is not None and entry.process.pid == pid and entry.state != State.DONE:
                return dict(entry.body)
        return self.declared_body(kind)

    def declared_body(self, kind: str) -> dict[str, Any] | None:
        """The request of a declared resource, or of a declared session on a READY resource of a stack (from
        the journal when a stack's create is there: exactly what the provider sends)."""
        state = self.control.state()
        ready = {
            o["id"]
            for o in state["model_resources"]
            if short(o["status"]) == "READY"
            and state["created_with"].get(o["id"]) in {s.digest for s in self.stacks}
        }
        bodies = [
            e.body
            for e in (s.entry for s in reversed(journal_entries(self.since)))
            if e.kind == JOURNAL_KIND[kind]
            and self.ours(e)
            and (kind == "resource" or e.body.get("model_resources_id") in ready)
        ]
        if bodies:
            return dict(bodies[0])
        if kind == "resource":
            return dict(RESOURCE_BODY)
        if ready and not self.plan.cli:
            _name, display, rank = self.plan.sessions[0]
            return {
                "model_resources_id": sorted(ready)[0],
                "display_name": display,
                "lora_config": {"rank": rank, "alpha": 2 * rank},
            }
        return None  # no READY resource yet: later

    def post(self, kind: str, trigger: str, body: dict[str, Any]) -> None:
        path = RESOURCES if kind == "resource" else SESSIONS
        try:
            answer = self.http.post(path, json=body)
            made = answer.json().get("id") if answer.status_code == 200 else None
            self.said.append(
                f"colleague: {kind} look-alike ({trigger}): HTTP {answer.status_code} {made or ''}"
            )
        except (httpx.HTTPError, ValueError) as exc:
            self.said.append(f"colleague: {kind} look-alike ({trigger}): {type(exc).__name__}")

    def stop_sessions(self) -> None:
        """His training is over: he stops his own sessions, and waits until they hold no slot (a resource is
        refused its stop while a session of any key still holds one)."""
        with self._lock:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                state = self.control.state()
                his = [
                    s
                    for s in state["training_sessions"]
                    if state["created_with"].get(s["id"]) == DIGESTS["colleague"]
                    and short(s["status"]) in ("CREATING", "RUNNING", "STOPPING")
                ]
                if not his:
                    return
                for session in his:
                    if short(session["status"]) != "STOPPING":
                        try:
                            self.http.post(f"{SESSIONS}/{session['id']}/stop")
                        except httpx.HTTPError:
                            pass  # a fault: he tries again
                time.sleep(0.2)

    def finish(self) -> None:
        self.done.set()
        if self.is_alive():
            self.join(timeout=10)

    def close(self) -> None:
        self.http.close()
        self.control.close()


# ------------------------------------------------------------------------------------------------- main

NOT_FAILURES = ("left for the user", "taken, indistinguishable")  # findings reported, not failures
MUST_BE_ZERO = (
    "orphans",
    "duplicates",
    "taken from another owner",
    "healthy objects stopped",
    "billed after destroy",
    "lost state",
    "key leaks",
    "engine deaths unnoticed",
    "commands still failing after faults cleared",
    "ran past its deadline",
    "re-created after its deadline",
)


def write_evidence(folder: Path, report: Report) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        **report.evidence,
        "findings.txt": "\n".join(report.findings),
        "notes.txt": "\n".join(report.notes),
        "errors.txt": "\n\n----\n".join(report.errors),
        "outputs.txt": "\n\n----\n".join(report.outputs),
    }
    for name, text in files.items():
        (folder / name).write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cycles", type=int, default=50, help="cycles through the provider server")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--first-cycle", type=int, default=0, help="number of the first cycle (to replay one)"
    )
    parser.add_argument(
        "--cli-cycles", type=int, default=0, help="further cycles through the real Pulumi CLI"
    )
    parser.add_argument(
        "--runner-cycles",
        type=int,
        default=0,
        help="further cycles with state and journal in a bucket and runners as machines (RUNNER_CASES in turn)",
    )
    parser.add_argument(
        "--deadline-cycles",
        type=int,
        default=0,
        help="further stand-in cycles with a deadline case, at each moment in turn (DEADLINE_MOMENTS)",
    )
    parser.add_argument(
        "--focus",
        choices=FOCUSES,
        default=None,
        help="put this fault in every cycle, on top of its drawn mix (session-act-then-5xx: session creates "
        "that act, then get the API's own 500/503; deadline: a deadline case of a drawn moment in every stand-in "
        "cycle, deadline-create / deadline-outage / deadline-refresh: at that moment)",
    )
    parser.add_argument("--verbose", action="store_true", help="one line per cycle, findings as they come")
    parser.add_argument("--dry-run", action="store_true", help="print each cycle's plan and run nothing")
    parser.add_argument(
        "--evidence",
        type=Path,
        default=None,
        metavar="DIR",
        help="write what a cycle with a finding saw (provider and CLI output, errors, the emulator's final "
        "state and request log) to DIR/cycle-<N>/",
    )
    args = parser.parse_args(argv)

    cycles = range(args.first_cycle, args.first_cycle + args.cycles)
    cli_cycles = range(cycles.stop, cycles.stop + args.cli_cycles)
    runner_cycles = range(cli_cycles.stop, cli_cycles.stop + args.runner_cycles)
    deadline_cycles = range(runner_cycles.stop, runner_cycles.stop + args.deadline_cycles)
    every = (*cycles, *cli_cycles, *runner_cycles, *deadline_cycles)

    def plan_of(cycle: int) -> Plan:
        if cycle in runner_cycles:
            return make_runner_plan(args.seed, cycle, focus=args.focus)
        if cycle in deadline_cycles:
            moment = DEADLINE_MOMENTS[cycle % len(DEADLINE_MOMENTS)]
            return make_plan(args.seed, cycle, focus=f"deadline-{moment}")
        return make_plan(args.seed, cycle, cli=cycle in cli_cycles, focus=args.focus)

    if args.dry_run:
        for cycle in every:
            plan = plan_of(cycle)
            ranks = ",".join(str(s[2]) for s in plan.sessions)
            print(
                f"cycle {cycle}{' (CLI)' if plan.cli else ''}: {len(plan.sessions)} sessions (ranks {ranks}); "
                f"{' '.join(plan.labels()) or 'no faults'}"
            )
        return 0

    sigint_as_the_engine_leaves_it()  # the SIGINT faults reach the providers wherever the campaign runs
    campaign = Campaign(args)
    reports: list[Report] = []
    started = time.monotonic()
    try:
        for cycle in every:
            plan = plan_of(cycle)
            report = campaign.run_cli_cycle(plan) if plan.cli else campaign.run_cycle(plan)
            if report is None:
                continue
            reports.append(report)
            if args.verbose:
                print(
                    f"cycle {cycle} seed {args.seed}: {len(plan.sessions)} sessions; faults {report.faults} "
                    f"[{' '.join(plan.labels()) or '-'}]; {report.outcome}; failed ops {report.failed_ops}; "
                    f"{report.seconds:.1f} s",
                    flush=True,
                )
            replay = f"--seed {args.seed} --first-cycle {cycle} " + (
                "--cycles 0 --deadline-cycles 1"
                if cycle in deadline_cycles
                else (f"--focus {args.focus} " if args.focus else "")
                + (
                    "--cycles 0 --cli-cycles 1"
                    if plan.cli
                    else "--cycles 0 --runner-cycles 1"
                    if plan.runner
                    else "--cycles 1"
                )
            )
            for finding in report.findings:
                print(f"chaos: cycle {cycle} (replay: {replay}): {finding}", file=sys.stderr, flush=True)
            failing = any(not f.startswith(NOT_FAILURES) for f in report.findings)
            if failing and args.evidence is not None:
                write_evidence(args.evidence / f"cycle-{cycle}", report)
            if failing or args.verbose:
                for line in report.error_lines:
                    print(f"chaos: cycle {cycle}: {line}", file=sys.stderr)
                for note in report.notes:
                    print(f"chaos: cycle {cycle}: note: {note}", file=sys.stderr)
    finally:
        campaign.close()
    totals = {
        "orphans": sum(len(r.orphans) for r in reports),
        "duplicates": sum(len(r.duplicates) for r in reports),
        "taken from another owner": sum(len(r.taken) for r in reports),
        "healthy objects stopped": sum(len(r.healthy) for r in reports),
        "billed after destroy": sum(len(r.billed) for r in reports),
        "lost state": sum(len(r.lost) for r in reports),
        "key leaks": sum(len(r.leaks) for r in reports),
        "engine deaths unnoticed": sum(len(r.unnoticed) for r in reports),
        "commands still failing after faults cleared": sum(len(r.still_failing) for r in reports),
        "ran past its deadline": sum(len(r.overran) for r in reports),
        "re-created after its deadline": sum(len(r.recreated) for r in reports),
    }
    if args.verbose:
        print(f"wall time: {time.monotonic() - started:.1f} s", file=sys.stderr)
    for which, cycles_of in (
        ("cross-backend", [r.plan for r in reports if r.plan.backends]),
        ("zombie engine", [r.plan for r in reports if r.plan.zombie]),
        ("deadline", [r.plan for r in reports if r.plan.deadline]),
    ):
        named = ", ".join(f"{p.cycle}{' (CLI)' if p.cli else ''}" for p in cycles_of) or "none"
        print(f"{which} case in cycles: {named} (seed {args.seed})")
    named = ", ".join(f"{r.plan.cycle} ({r.plan.runner.label})" for r in reports if r.plan.runner) or "none"
    print(f"runner cases in cycles: {named} (seed {args.seed})")
    print(f"cycles: {len(reports)}")
    print(f"faults injected: {sum(r.faults for r in reports)}")
    print(f"failed operations: {sum(r.failed_ops for r in reports)}")
    print(f"two stack cycles: {sum(r.plan.stacks == 2 and not r.plan.backends for r in reports)}")
    print(
        f"two stack cycles with a kill: {sum(r.second_stack_killed and not r.plan.backends for r in reports)}"
    )
    print(f"cross-backend cycles: {sum(r.backends_seen for r in reports)}")
    print(f"cross-backend cycles with a kill: {sum(r.backends_seen and r.kills > 0 for r in reports)}")
    print(f"colleague look-alikes: {sum(r.colleague_made for r in reports)}")
    print(f"session creates made, then answered 500/503: {sum(r.session_acts for r in reports)}")
    print(
        f"cycles with a session create made, then answered 500/503: {sum(r.session_acts > 0 for r in reports)}"
    )
    print(f"twin cycles with a kill: {sum(r.plan.twins and r.kills > 0 for r in reports)}")
    print(f"kills during a take-over: {sum(r.takeover_kills for r in reports)}")
    print(f"poisoned lists: {sum(r.poisoned for r in reports)}")
    print(f"zombie engine kills: {sum(r.engine_kills for r in reports)}")
    print(f"zombie engines seen gone: {sum(r.zombies_seen for r in reports)}")
    print(f"taken over after a zombie engine: {sum(len(r.gone_taken) for r in reports)}")
    runs = [r for r in reports if r.plan.runner is not None]
    print(f"runner cycles: {len(runs)}")
    print(f"runner cycles with the journal beside the state: {sum(r.journal_in_bucket for r in runs)}")
    for case in RUNNER_CASES:
        if case.interrupt == "pause":
            ran = sum(r.plan.runner == case and r.paused for r in runs)
        else:
            ran = sum(r.plan.runner == case and r.kills > 0 for r in runs)
        print(f"{case.name}: {ran}")
    print(f"stragglers that lost their lease: {sum(r.straggler_lost for r in runs)}")
    print(f"deadline cycles: {sum(r.deadline_ran for r in reports)}")
    for moment, words in zip(DEADLINE_MOMENTS, ("a create", "an outage", "a refresh"), strict=True):
        ran = sum(r.plan.deadline == moment and r.deadline_ran for r in reports)
        print(f"deadline cycles, during {words}: {ran}")
    print(f"left for the user to decide: {sum(len(r.left) for r in reports)}")
    print(f"taken, indistinguishable from the stack's own: {sum(len(r.unprovable) for r in reports)}")
    print(f"commands run after faults cleared: {sum(r.cleared_commands for r in reports)}")
    print(
        "commands still failing after faults cleared, waiting for what was left for the user: "
        f"{sum(Campaign.blocked_by_left(r) for r in reports)}"
    )
    for name, value in totals.items():
        print(f"{name}: {value}")
    sys.stdout.flush()
    return 1 if any(totals.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
