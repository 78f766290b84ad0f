"""The orphan finder: active GPUs and training sessions that no Pulumi stack holds, listed and (on request) stopped.

Why: Pulumi only knows the objects its state records, and a state records a create only once the provider
answers. A ``pulumi up`` killed half-way, a CI runner thrown away mid-create, a stack removed with
``pulumi stack rm --force``, a notebook that made a session by hand: each can leave a model resource billing,
or a training session holding a slot, that no ``pulumi destroy`` will ever stop. The create journal
(:mod:`pulumi_together_rl.journal`) takes such an object over when the *same* create runs again on the *same*
machine; everything else needs a look from outside. That is this module, behind
``python -m pulumi_together_rl orphans``.

What it does:

1. Collects the ids the given stacks hold: the ``id`` of every resource in each ``pulumi stack export``
   (files, or exported through the Pulumi CLI), and of pending operations that carry one. Any id counts, not
   only ``pulumi-python:dynamic/together:*`` ones, so a ``.get()`` reference holds its object too.
2. Lists the API key's user's *active* objects (``created_by=me``): model resources PENDING, CREATING or READY
   and training sessions CREATING or RUNNING (``LIVE_RESOURCE_STATUSES`` / ``LIVE_SESSION_STATUSES``).
3. Every listed object whose id no stack holds is an orphan; the hourly price of each orphan model resource
   comes from the estimate-cost endpoint ("price unknown" when that fails). The journal labels the orphans an
   interrupted ``pulumi up`` left; an object a process on this machine is creating right now (its journal
   entry's process is alive) is left out with a note, because its stack will hold it once the create returns.
4. With ``--stop``: sessions first, then model resources, each without ``force``. A resource that still
   carries a session which is not an orphan (a stack holds it, or another user made it) is refused by the
   API, reported, and left running; a resource whose only attached sessions are the orphans just stopped
   waits for them to end (a session holds its slot while STOPPING), then is stopped.

With no stack state at all every object would look orphaned, so a source is required; ``--none`` says "no
stack holds anything" on purpose. The API key is never printed: errors come from the client, which redacts
it, and everything this command writes is scrubbed of it once more.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from . import config, journal
from .client import errors
from .client.api import ENV_API_KEY, ENV_BASE_URL, TogetherRL
from .client.models import (
    RESOURCE_GONE,
    SESSION_GONE,
    SESSION_HOLDS_SLOT,
    ComputeConfigParams,
    ModelResource,
    ModelResourceCreateRequest,
    ModelResourceStatus,
    TrainingSession,
    TrainingSessionStatus,
)
from .client.reconcile import LIVE_RESOURCE_STATUSES, LIVE_SESSION_STATUSES
from .waiting import WaitFailed, WaitTimeout, format_elapsed, wait_for

MODEL_RESOURCE = "model resource"
TRAINING_SESSION = "training session"
TOGETHER_TYPE_PREFIX = "pulumi-python:dynamic/together:"

#: Exit statuses of the command (2 is argparse's own, for usage errors such as no stack state).
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_ORPHANS_FOUND = 3

#: How long ``--stop`` waits, by default, for stopping orphan sessions to end before stopping their resource.
DEFAULT_STOP_TIMEOUT = 600.0
#: How long one ``pulumi`` CLI command may take.
PULUMI_TIMEOUT = 300.0

NO_SOURCES = (
    "finding orphans: no stack state was given, so every active object would look orphaned. Pass --state FILE "
    "(a `pulumi stack export`), --stack NAME or --all-stacks, or --none to treat every active object as an "
    "orphan on purpose."
)
NONE_WITH_SOURCES = (
    "finding orphans: --none says no stack holds anything, which contradicts the stack states also given. "
    "Pass either --none or --state/--stack/--all-stacks."
)


class OrphanError(Exception):
    """An error shown to the user as one sentence: ``<doing> <kind> (<ident>): <cause>. <todo>``."""

    def __init__(self, doing: str, kind: str, ident: str | None, cause: str, todo: str = "") -> None:
        self.doing, self.kind, self.ident, self.cause, self.todo = doing, kind, ident, cause, todo
        where = f" ({ident})" if ident else ""
        subject = f"{doing} {kind}".strip()
        tail = f" {todo.rstrip('.')}." if todo else ""
        super().__init__(f"{subject}{where}: {cause.rstrip('.')}.{tail}")


# ------------------------------------------------------------------------------------------ stack states


@dataclasses.dataclass(frozen=True)
class StackState:
    """One ``pulumi stack export``: where it came from (``dev.json``, ``stack dev``) and its JSON."""

    source: str
    data: Mapping[str, Any]

    @property
    def resources(self) -> list[Mapping[str, Any]]:
        return [r for r in self._deployment.get("resources") or [] if isinstance(r, Mapping)]

    @property
    def pending_operations(self) -> list[Mapping[str, Any]]:
        return [p for p in self._deployment.get("pending_operations") or [] if isinstance(p, Mapping)]

    @property
    def together_ids(self) -> set[str]:
        """Ids of the stack's Together model resources and training sessions."""
        return {
            r["id"]
            for r in self.resources
            if _is_id(r.get("id")) and str(r.get("type", "")).startswith(TOGETHER_TYPE_PREFIX)
        }

    @property
    def ids(self) -> set[str]:
        """Every id the stack holds: its resources', and its pending operations' that have one."""
        held = {r["id"] for r in self.resources if _is_id(r.get("id"))}
        for operation in self.pending_operations:
            resource = operation.get("resource")
            if isinstance(resource, Mapping) and _is_id(resource.get("id")):
                held.add(resource["id"])
        return held

    @property
    def _deployment(self) -> Mapping[str, Any]:
        deployment = self.data.get("deployment")
        return deployment if isinstance(deployment, Mapping) else {}


def parse_state(text: str, source: str) -> StackState:
    """A ``pulumi stack export`` (``{"version": 3, "deployment": {"resources": [...]}}``) from its text."""
    doing = "reading the stack export"
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise OrphanError(
            doing, "", source, f"it is not JSON ({exc})", "Pass the output of `pulumi stack export`"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("deployment"), dict):
        raise OrphanError(
            doing,
            "",
            source,
            "it is not a `pulumi stack export` (there is no deployment object)",
            "Pass the output of `pulumi stack export --stack <name>`",
        )
    resources = data["deployment"].get("resources")
    if resources is not None and not isinstance(resources, list):
        raise OrphanError(
            doing,
            "",
            source,
            "its deployment.resources is not a list",
            "Pass the output of `pulumi stack export --stack <name>`",
        )
    return StackState(source, data)


def load_state_file(path: str | os.PathLike[str]) -> StackState:
    """Read a ``pulumi stack export`` file (``-`` is standard input)."""
    name = str(path)
    if name == "-":
        return parse_state(sys.stdin.read(), "standard input")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise OrphanError(
            "reading the stack export",
            "",
            name,
            exc.strerror or type(exc).__name__,
            "Write it with `pulumi stack export --stack <name> > FILE` and pass that file",
        ) from None
    except UnicodeDecodeError:
        raise OrphanError(
            "reading the stack export",
            "",
            name,
            "it is not UTF-8 text",
            "Pass the output of `pulumi stack export`",
        ) from None
    return parse_state(text, name)


def held_ids(states: Iterable[StackState | Mapping[str, Any]]) -> set[str]:
    """Every id any of ``states`` holds (``StackState`` or a bare ``pulumi stack export`` dict)."""
    held: set[str] = set()
    for state in states:
        held |= (state if isinstance(state, StackState) else StackState("", state)).ids
    return held


Runner = Callable[..., "subprocess.CompletedProcess[str]"]


def export_stack(name: str, *, cwd: str | None = None, run: Runner = subprocess.run) -> StackState:
    """``pulumi stack export --stack NAME`` through the Pulumi CLI on PATH, in ``cwd``."""
    result = _pulumi(
        ["stack", "export", "--stack", name], doing="exporting", what="stack", ident=name, cwd=cwd, run=run
    )
    return parse_state(result, f"stack {name}")


def list_stacks(
    *, cwd: str | None = None, run: Runner = subprocess.run, note: Callable[[str], None] | None = None
) -> list[str]:
    """Names of the stacks of the project in ``cwd`` (``pulumi stack ls --json``)."""
    where = os.path.abspath(cwd or os.curdir)
    text = _pulumi(
        ["stack", "ls", "--json"], doing="listing", what="the stacks of", ident=where, cwd=cwd, run=run
    )
    try:
        listed = json.loads(text)
        names = [str(s["name"]) for s in listed]
    except (ValueError, TypeError, KeyError):
        raise OrphanError(
            "listing",
            "the stacks of",
            where,
            "`pulumi stack ls --json` did not answer a list of stacks",
            "Check that the Pulumi CLI on PATH is a recent Pulumi v3",
        ) from None
    for stack in listed:
        if isinstance(stack, dict) and stack.get("updateInProgress") and note is not None:
            note(
                f"note: stack {stack['name']} has an update in progress: what it is creating right now is not "
                "in its state yet and shows here as an orphan. Run again once it finishes before using --stop."
            )
    return names


def _pulumi(args: list[str], *, doing: str, what: str, ident: str, cwd: str | None, run: Runner) -> str:
    todo_cli = (
        "Install the Pulumi CLI (https://www.pulumi.com/docs/iac/download-install/) and put it on PATH, or pass "
        "exported files with --state"
    )
    executable = shutil.which("pulumi")
    if executable is None:
        raise OrphanError(doing, what, ident, "the Pulumi CLI (`pulumi`) is not on PATH", todo_cli)
    command = [executable, *args, "--non-interactive"]
    try:
        result = run(command, cwd=cwd, capture_output=True, text=True, timeout=PULUMI_TIMEOUT, check=False)
    except FileNotFoundError:
        raise OrphanError(
            doing,
            what,
            ident,
            f"the project folder {cwd!r} does not exist",
            "Pass the project's folder with --cwd",
        ) from None
    except NotADirectoryError:
        raise OrphanError(
            doing, what, ident, f"{cwd!r} is not a folder", "Pass the project's folder with --cwd"
        ) from None
    except subprocess.TimeoutExpired:
        raise OrphanError(
            doing,
            what,
            ident,
            f"`pulumi {' '.join(args)}` did not finish in {PULUMI_TIMEOUT:g} s",
            "Check that the backend is reachable (`pulumi whoami`), or pass exported files with --state",
        ) from None
    except OSError as exc:
        raise OrphanError(doing, what, ident, f"the Pulumi CLI could not be run ({exc})", todo_cli) from None
    if result.returncode != 0:
        lines = [line.strip() for line in (result.stderr or result.stdout or "").splitlines() if line.strip()]
        detail = lines[-1] if lines else f"exit status {result.returncode}"
        raise OrphanError(
            doing,
            what,
            ident,
            f"`pulumi {' '.join(args)}` failed: {detail.rstrip('.')}",
            "Check the stack name (`pulumi stack ls`), the project folder (--cwd) and the login (`pulumi whoami`)",
        )
    return result.stdout


# ------------------------------------------------------------------------------------------------ orphans


@dataclasses.dataclass
class Orphan:
    """An active object of this key's user that no given stack holds."""

    kind: str
    """:data:`MODEL_RESOURCE` or :data:`TRAINING_SESSION`."""
    id: str
    status: str
    """The short status: ``READY``, ``RUNNING``."""
    created_at: datetime
    base_model: str | None = None
    price_per_hour: float | None = None
    """Model resources: the estimate-cost price of a resource like it; None when unknown."""
    currency: str | None = None
    model_resources_id: str | None = None
    """Training sessions: the model resource it runs on."""
    resource_is_orphan: bool | None = None
    """Training sessions: whether its model resource is an orphan too (None: not known to this key's user)."""
    held_sessions: list[str] = dataclasses.field(default_factory=list)
    """Model resources: active sessions of this user on it that a stack holds (they block a stop)."""
    display_name: str | None = None
    interrupted_at: datetime | None = None
    """When the journal says an interrupted ``pulumi up`` began creating it; None when it says nothing."""

    def age(self, now: datetime | None = None) -> float:
        """Seconds since it was created (never negative: the API's clock and ours can disagree)."""
        moment = now or datetime.now(timezone.utc)
        return max(0.0, (moment - _aware(self.created_at)).total_seconds())

    def to_json(self, now: datetime | None = None) -> dict[str, Any]:
        return {
            "kind": self.kind.replace(" ", "_"),
            "id": self.id,
            "status": self.status,
            "created_at": _aware(self.created_at).isoformat(),
            "age_seconds": int(self.age(now)),
            "base_model": self.base_model,
            "price_per_hour": self.price_per_hour,
            "currency": self.currency,
            "model_resources_id": self.model_resources_id,
            "held_sessions": list(self.held_sessions),
            "display_name": self.display_name,
            "interrupted_create_at": _aware(self.interrupted_at).isoformat() if self.interrupted_at else None,
        }


def find_orphans(
    client: TogetherRL,
    held: Iterable[str],
    journal_entries: Iterable[journal.Entry] = (),
    *,
    min_age: float = 0.0,
    price: bool = True,
    now: datetime | None = None,
    note: Callable[[str], None] | None = None,
) -> list[Orphan]:
    """The active model resources and training sessions of ``client``'s user whose ids are not in ``held``.

    Model resources first, then sessions, each oldest first. ``journal_entries`` (:func:`journal.entries`)
    label what an interrupted create left; an object whose entry's process is still running is being created
    right now and is left out, as is anything younger than ``min_age`` seconds; ``note`` receives one line
    about each object left out. With ``price``, each orphan model resource gets its estimated hourly price.
    Listing failures raise :class:`OrphanError`.
    """
    held = set(held)
    now = now or datetime.now(timezone.utc)
    say = note or (lambda line: None)
    resources: list[ModelResource] = _listing(
        MODEL_RESOURCE, lambda: client.iter_model_resources(status=LIVE_RESOURCE_STATUSES, created_by="me")
    )
    sessions: list[TrainingSession] = _listing(
        TRAINING_SESSION, lambda: client.iter_training_sessions(status=LIVE_SESSION_STATUSES, created_by="me")
    )
    interrupted, creating = _journal_ids(journal_entries, client.base_url)

    def is_candidate(kind: str, obj: ModelResource | TrainingSession) -> bool:
        if obj.id in held:
            return False
        if obj.id in creating:
            say(
                f"note: left out {kind} {obj.id}: a running process on this machine (pid {creating[obj.id].pid}) "
                "is creating it right now, so its stack will hold it once that create returns."
            )
            return False
        age = max(0.0, (now - _aware(obj.created_at)).total_seconds())
        if age < min_age:
            say(
                f"note: left out {kind} {obj.id}: it is {format_age(age)} old, younger than --min-age "
                f"({format_age(min_age)}); a `pulumi up` elsewhere may still be creating it."
            )
            return False
        return True

    orphan_resources = [r for r in resources if is_candidate(MODEL_RESOURCE, r)]
    orphan_sessions = [s for s in sessions if is_candidate(TRAINING_SESSION, s)]
    orphan_resource_ids = {r.id for r in orphan_resources}
    listed_resource_ids = {r.id for r in resources}

    found: list[Orphan] = []
    for r in sorted(orphan_resources, key=_oldest_first):
        entry = interrupted.get(r.id)
        cost, currency = _price(client, r) if price else (None, None)
        found.append(
            Orphan(
                kind=MODEL_RESOURCE,
                id=r.id,
                status=_short(r.status),
                created_at=r.created_at,
                base_model=r.base_model,
                price_per_hour=cost,
                currency=currency,
                held_sessions=sorted(s.id for s in sessions if s.model_resources_id == r.id and s.id in held),
                interrupted_at=entry.started if entry else None,
            )
        )
    for s in sorted(orphan_sessions, key=_oldest_first):
        entry = interrupted.get(s.id)
        found.append(
            Orphan(
                kind=TRAINING_SESSION,
                id=s.id,
                status=_short(s.status),
                created_at=s.created_at,
                base_model=s.base_model,
                model_resources_id=s.model_resources_id,
                resource_is_orphan=(
                    s.model_resources_id in orphan_resource_ids
                    if s.model_resources_id in listed_resource_ids
                    else None
                ),
                display_name=s.display_name or None,
                interrupted_at=entry.started if entry else None,
            )
        )
    return found


def price_request(resource: ModelResource) -> ModelResourceCreateRequest:
    """The estimate-cost request of a resource like ``resource`` (its base model, LoRA flag and compute)."""
    compute = resource.compute_config
    params: dict[str, Any] = {"num_generator_replicas": compute.num_generator_replicas}
    if compute.gpu_type is not None:
        params["gpu_type"] = compute.gpu_type
    return ModelResourceCreateRequest(
        base_model=resource.base_model,
        lora_enabled=resource.lora_enabled,
        compute_config=ComputeConfigParams(**params),
    )


def _price(client: TogetherRL, resource: ModelResource) -> tuple[float | None, str | None]:
    try:
        estimate = client.estimate_model_resource_cost(price_request(resource))
    except (errors.TogetherError, ValueError):  # pydantic's ValidationError is a ValueError
        return None, None
    return estimate.price_per_hour, estimate.currency


def _journal_ids(
    entries: Iterable[journal.Entry], base_url: str
) -> tuple[dict[str, journal.Entry], dict[str, journal.Entry]]:
    """(interrupted creates, creates in flight on this machine) by object id, for this API."""
    interrupted: dict[str, journal.Entry] = {}
    creating: dict[str, journal.Entry] = {}
    for entry in entries:
        if not entry.id or entry.base_url.rstrip("/") != base_url.rstrip("/"):
            continue
        # The journal's own liveness test (this process counts as alive: its creates are in flight).
        (creating if journal.alive(entry.pid) else interrupted)[entry.id] = entry
    return interrupted, creating


def _listing(kind: str, fetch: Callable[[], Iterable[Any]]) -> list[Any]:
    failure: errors.TogetherError
    try:
        return list(fetch())
    except errors.TogetherError as exc:
        failure = exc
    cause, todo = explain(failure)
    raise OrphanError(f"listing your active {kind}s", "", None, cause, todo)


# --------------------------------------------------------------------------------------------- stopping


@dataclasses.dataclass
class StopResult:
    orphan: Orphan
    stopped: bool
    message: str
    """One sentence: what happened (``stopped ...``) or the error, in the project's grammar."""


def stop_orphans(
    client: TogetherRL,
    orphans: Sequence[Orphan],
    *,
    timeout: float = DEFAULT_STOP_TIMEOUT,
    poll_interval: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    out: IO[str] | None = None,
) -> list[StopResult]:
    """Stop ``orphans``: training sessions first, then model resources, never with ``force``.

    A model resource the API refuses to stop is looked at: when the sessions attached to it are all ending
    (the orphans just stopped), the stop waits for them (up to ``timeout`` seconds, progress lines on ``out``)
    and is sent again; when one is still CREATING or RUNNING (held by a stack, or another user's), it is
    reported and left running. A failure never stops the others from being tried. Results are in stop order.
    """
    interval = poll_interval if poll_interval is not None else config.current().poll_interval
    results: list[StopResult] = []
    for orphan in (o for o in orphans if o.kind == TRAINING_SESSION):
        results.append(_stop_session(client, orphan))
    orphan_sessions = {o.id for o in orphans if o.kind == TRAINING_SESSION}
    for orphan in (o for o in orphans if o.kind == MODEL_RESOURCE):
        results.append(_stop_resource(client, orphan, orphan_sessions, timeout, interval, sleep, clock, out))
    return results


def _stop_session(client: TogetherRL, orphan: Orphan) -> StopResult:
    failure: errors.TogetherError
    try:
        stopped = client.stop_training_session(orphan.id)
        return StopResult(
            orphan, True, f"stopped {TRAINING_SESSION} {orphan.id} (now {_short(stopped.status)})"
        )
    except errors.NotFound:
        return StopResult(orphan, True, f"{TRAINING_SESSION} {orphan.id} was already gone")
    except errors.TogetherError as exc:
        failure = exc
    if isinstance(failure, (errors.Conflict, errors.BadRequest)):
        # A refusal is judged by the object's state, never by the message: already ending counts as stopped.
        status = _status_after_refusal(lambda: client.get_training_session(orphan.id))
        if status is None or status in SESSION_GONE or status == TrainingSessionStatus.STOPPING:
            state = "gone" if status is None else _short(status)
            return StopResult(orphan, True, f"{TRAINING_SESSION} {orphan.id} was already {state}")
    cause, todo = explain(failure)
    return StopResult(orphan, False, str(OrphanError("stopping", TRAINING_SESSION, orphan.id, cause, todo)))


def _stop_resource(
    client: TogetherRL,
    orphan: Orphan,
    orphan_sessions: set[str],
    timeout: float,
    interval: float,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
    out: IO[str] | None,
) -> StopResult:
    ident = orphan.id
    failure: errors.TogetherError | None = None
    for attempt in range(2):  # the second only after waiting for the attached sessions to end
        try:
            stopped = client.stop_model_resource(ident, force=False)
            return StopResult(
                orphan, True, f"stopped {MODEL_RESOURCE} {ident} (now {_short(stopped.status)})"
            )
        except errors.NotFound:
            return StopResult(orphan, True, f"{MODEL_RESOURCE} {ident} was already gone")
        except errors.TogetherError as exc:
            failure = exc
        if not isinstance(failure, (errors.Conflict, errors.BadRequest)) or attempt:
            break
        try:
            attached = _attached(client, ident)
        except errors.TogetherError as exc:
            cause, todo = explain(exc)
            refusal = f"the API refused the stop ({_http(failure)}), and listing its sessions failed: {cause}"
            return _refused(orphan, refusal, todo)
        if not attached:
            status = _status_after_refusal(lambda: client.get_model_resource(ident))
            if status is None or status in RESOURCE_GONE:
                state = "gone" if status is None else _short(status)
                return StopResult(orphan, True, f"{MODEL_RESOURCE} {ident} was already {state}")
            break
        blocking = [s.id for s in attached if s.status in LIVE_SESSION_STATUSES]
        unstopped = [i for i in blocking if i in orphan_sessions]  # orphans whose own stop failed above
        if unstopped:
            return _refused(
                orphan,
                "the API refused to stop it because orphan training sessions whose stop failed are still "
                f"attached: {', '.join(unstopped)}",
                "Fix what stopped those (see their errors), then run again; it was left running",
            )
        if blocking:
            return _refused(
                orphan,
                "the API refused to stop it because training sessions that are not orphans are attached: "
                f"{', '.join(blocking)} (a given stack holds them, or another user made them)",
                "Stop or destroy those sessions where they are managed, then run again; it was left running",
            )
        try:
            wait_for(
                lambda: _attached(client, ident),
                done=lambda sessions: not sessions,
                failed=lambda sessions: any(s.status in LIVE_SESSION_STATUSES for s in sessions or ()),
                describe=lambda sessions: (
                    f"{MODEL_RESOURCE} {ident}: waiting for "
                    f"{len(sessions) if sessions is not None else 'its'} stopping training session(s) to end"
                ),
                timeout=timeout,
                poll_interval=interval,
                transient=errors.is_transient,
                clock=clock,
                sleep=sleep,
                out=out,
            )
        except WaitTimeout:
            return _refused(
                orphan,
                f"its training sessions were still stopping after {format_elapsed(timeout)}",
                "Run again later (or with a longer --timeout); it was left running",
            )
        except WaitFailed as exc:
            started = [s.id for s in exc.last or () if s.status in LIVE_SESSION_STATUSES]
            return _refused(
                orphan,
                f"a training session was started on it while its orphan sessions stopped: {', '.join(started)}",
                "Find out who uses it before stopping it; it was left running",
            )
        except errors.TogetherError as exc:
            cause, todo = explain(exc)
            return _refused(orphan, f"waiting for its training sessions to end failed: {cause}", todo)
    assert failure is not None
    cause, todo = explain(failure)
    return _refused(orphan, cause, todo)


def _refused(orphan: Orphan, cause: str, todo: str) -> StopResult:
    return StopResult(orphan, False, str(OrphanError("stopping", orphan.kind, orphan.id, cause, todo)))


def _attached(client: TogetherRL, resource_id: str) -> list[TrainingSession]:
    """Every session (any user's) that still holds a slot on the resource."""
    return list(
        client.iter_training_sessions(model_resources_id=resource_id, status=tuple(SESSION_HOLDS_SLOT))
    )


def _status_after_refusal(get: Callable[[], Any]) -> Any:
    """The object's status after a refused stop; None when it is gone; the status ``"unknown"`` when the
    lookup fails (which counts as still active)."""
    try:
        return get().status
    except errors.NotFound:
        return None
    except errors.TogetherError:
        return "unknown"


# ------------------------------------------------------------------------------------------ the command


def run(args: argparse.Namespace, *, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    """The ``orphans`` command, from parsed arguments (see ``__main__``). Returns the exit status."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    secret = (args.api_key if args.api_key is not None else os.environ.get(ENV_API_KEY, "")).strip()

    def emit(stream: IO[str], text: str) -> None:
        stream.write(errors.redact(text, secret) + "\n")
        stream.flush()

    def note(text: str) -> None:
        emit(stderr, text)

    try:
        states = _gather_states(args, note)
        for state in states:
            if not state.together_ids:
                note(f"note: {state.source} holds no Together model resources or training sessions.")
            if state.pending_operations:
                note(
                    f"note: {state.source} has {len(state.pending_operations)} pending operation(s): an update is "
                    "running or was interrupted, so what it is creating is not in its state yet and may show "
                    "here as an orphan."
                )
        held = held_ids(states)
        if not secret:
            raise OrphanError(
                "connecting to the Together API",
                "",
                None,
                "no API key",
                f"Set {ENV_API_KEY} (or pass --api-key) to a key that may list and stop your model resources and "
                "training sessions",
            )
        client = _client(secret, args.base_url)
        with client:
            orphans = find_orphans(
                client, held, journal.entries(), min_age=max(0.0, args.min_age) * 60, note=note
            )
            now = datetime.now(timezone.utc)
            results: list[StopResult] | None = None
            if args.stop and orphans:
                results = stop_orphans(client, orphans, timeout=args.timeout, out=stderr)
    except OrphanError as exc:
        emit(stderr, f"error: {exc}")
        return EXIT_FAILED
    except KeyboardInterrupt:
        emit(stderr, "error: finding orphans: interrupted. Run again to see what is left.")
        return 130
    except Exception as exc:  # a bug: still one sentence, never a traceback that could carry request details
        if os.environ.get("TOGETHER_RL_DEBUG") == "1":
            raise
        cause, todo = explain(exc)
        emit(stderr, f"error: {OrphanError('finding orphans', '', None, cause, todo)}")
        return EXIT_FAILED

    stop_by_id = {r.orphan.id: r for r in results or ()}
    if args.json:
        listing = []
        for orphan in orphans:
            item = orphan.to_json(now)
            result = stop_by_id.get(orphan.id)
            item["stopped"] = bool(result and result.stopped)
            item["stop_error"] = result.message if result and not result.stopped else None
            listing.append(item)
        if results is not None:
            for result in results:
                emit(stderr, result.message)
        emit(stdout, json.dumps(listing, indent=2))
    else:
        for orphan in orphans:
            emit(stdout, format_line(orphan, now))
        if results is not None:
            for result in results:
                emit(
                    stdout if result.stopped else stderr,
                    result.message if result.stopped else f"error: {result.message}",
                )
        emit(stdout, summary(orphans, results, none=args.none, held=len(held), states=len(states)))

    if results is not None:
        return EXIT_OK if all(r.stopped for r in results) else EXIT_FAILED
    if orphans and args.fail_if_any:
        return EXIT_ORPHANS_FOUND
    return EXIT_OK


def _gather_states(args: argparse.Namespace, note: Callable[[str], None]) -> list[StackState]:
    states = [load_state_file(path) for path in args.state or ()]
    names = list(args.stack or ())
    if args.all_stacks:
        found = list_stacks(cwd=args.cwd, note=note)
        if not found and not states and not names:
            where = os.path.abspath(args.cwd or os.curdir)
            raise OrphanError(
                "listing",
                "the stacks of",
                where,
                "`pulumi stack ls` found no stacks there, so every active object would look orphaned",
                "Run it in the project's folder (or pass --cwd), or pass --none to treat every object as an orphan",
            )
        names += [n for n in found if n not in names]
    states += [export_stack(name, cwd=args.cwd) for name in names]
    return states


def _client(api_key: str, base_url: str | None) -> TogetherRL:
    failure: errors.ConfigurationError
    try:
        return TogetherRL(api_key=api_key, base_url=base_url)
    except errors.ConfigurationError as exc:
        failure = exc
    cause, todo = explain(failure)
    raise OrphanError("connecting to the Together API", "", None, cause, todo)


# --------------------------------------------------------------------------------------------- the output


def format_age(seconds: float) -> str:
    """``<1 min``, ``12 min``, ``3 h 5 min``, ``2 d 4 h``."""
    minutes = int(max(0.0, seconds) // 60)
    if minutes < 1:
        return "<1 min"
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def format_price(amount: float, currency: str | None) -> str:
    if currency in (None, "", "USD"):
        return f"${amount:.2f}/h"
    return f"{amount:.2f} {currency}/h"


def format_line(orphan: Orphan, now: datetime | None = None) -> str:
    """One listing line: kind, id, short status, age, and what is known of it."""
    details: list[str] = []
    if orphan.kind == MODEL_RESOURCE:
        if orphan.base_model:
            details.append(orphan.base_model)
        if orphan.price_per_hour is None:
            details.append("price unknown")
        else:
            billed = "" if orphan.status == ModelResourceStatus.READY.short else " once READY"
            details.append(format_price(orphan.price_per_hour, orphan.currency) + billed)
        if orphan.held_sessions:
            details.append(
                f"held training sessions on it: {', '.join(orphan.held_sessions)} (--stop will leave it running)"
            )
    else:
        where = {True: "an orphan too", False: "held by a stack", None: "not yours or not active"}
        details.append(
            f"on {MODEL_RESOURCE} {orphan.model_resources_id} ({where[orphan.resource_is_orphan]})"
        )
        if orphan.display_name:
            details.append(repr(orphan.display_name))
    if orphan.interrupted_at is not None:
        moment = _aware(orphan.interrupted_at).astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        details.append(f"left by an interrupted pulumi up at {moment}")
    return (
        f"{orphan.kind:<16}  {orphan.id}  {orphan.status:<8}  {format_age(orphan.age(now)):>10}  "
        + "; ".join(details)
    )


def summary(
    orphans: Sequence[Orphan],
    results: Sequence[StopResult] | None = None,
    *,
    none: bool = False,
    held: int = 0,
    states: int = 0,
) -> str:
    """The last line: how many orphans of each kind, their price, and what was (not) stopped."""
    if not orphans:
        if none:
            return "No orphans: this key's user has no active model resources or training sessions."
        return (
            "No orphans: every active model resource and training session of this key's user is held by the "
            f"given stack states ({held} held id{_s(held)} in {states} state{_s(states)})."
        )
    counted = f"{len(orphans)} orphan{_s(len(orphans))}: {_breakdown(orphans)}"
    if results is None:
        them = "it" if len(orphans) == 1 else "them"
        return f"{counted}. Dry run: nothing was stopped; run again with --stop to stop {them}."
    done = [r.orphan for r in results if r.stopped]
    failed = len(results) - len(done)
    if not failed:
        return f"{counted}. Stopped {'it' if len(orphans) == 1 else f'all {len(orphans)}'}."
    stopped = f"stopped {len(done)}" + (f" ({_breakdown(done)})" if done else "")
    return (
        f"{counted}. {stopped[0].upper()}{stopped[1:]}; {failed} could not be stopped (see the errors above)."
    )


def _breakdown(orphans: Sequence[Orphan]) -> str:
    resources = [o for o in orphans if o.kind == MODEL_RESOURCE]
    sessions = [o for o in orphans if o.kind == TRAINING_SESSION]
    parts = []
    if resources:
        known = [o for o in resources if o.price_per_hour is not None]
        unknown = len(resources) - len(known)
        if known:
            currency = known[0].currency
            same = all(o.currency == currency for o in known)
            price = (
                f"~{format_price(sum(o.price_per_hour or 0.0 for o in known), currency)}"
                if same
                else "mixed currencies"
            )
            if unknown:
                price += f", {unknown} of unknown price"
        else:
            price = "price unknown"
        parts.append(f"{len(resources)} model resource{_s(len(resources))} ({price})")
    if sessions:
        parts.append(f"{len(sessions)} training session{_s(len(sessions))}")
    return ", ".join(parts)


# ------------------------------------------------------------------------------------------ small helpers


def explain(exc: BaseException) -> tuple[str, str]:
    """(cause, what to do) of a client error, for an operator running this command."""
    if isinstance(exc, errors.Unauthorized):
        return f"the API rejected the key (HTTP 401: {exc.message or 'no message'})", (
            f"Check {ENV_API_KEY} / --api-key"
        )
    if isinstance(exc, errors.PermissionDenied):
        return f"the key may not do this (HTTP 403: {exc.message or 'no message'})", (
            "Use a key that may list and stop the project's model resources and training sessions"
        )
    if isinstance(exc, errors.RateLimited):
        return (
            f"the API refused it for now (HTTP 429: {exc.message or 'no message'})",
            "Wait a minute and run again",
        )
    if isinstance(exc, (errors.Conflict, errors.BadRequest)):
        return f"the API refused it (HTTP {exc.status}: {exc.message or 'no message'})", (
            "Check its status, then run again"
        )
    if isinstance(exc, errors.ServerError):
        return (
            f"the API failed (HTTP {exc.status}: {exc.message or 'no message'})",
            "Run again in a few minutes",
        )
    if isinstance(exc, errors.ApiError):
        return f"the API answered HTTP {exc.status}: {exc.message or 'no message'}", "Run again"
    if isinstance(exc, errors.ApiConnectionError):
        return f"the API could not be reached ({exc})", (
            f"Check {ENV_BASE_URL} / --base-url and the network, then run again"
        )
    if isinstance(exc, errors.ConfigurationError):
        message = str(exc).removeprefix("creating the Together RL client: ").split(". ", 1)[0]
        message = message.replace("the base_url argument (Pulumi config together:baseUrl)", "--base-url")
        return message, f"Check {ENV_API_KEY} / --api-key and {ENV_BASE_URL} / --base-url"
    return (
        f"{type(exc).__name__}: {exc}",
        "Run again; if it fails the same way, report it as a bug of pulumi-together-rl",
    )


def _http(exc: errors.TogetherError) -> str:
    status = getattr(exc, "status", None)
    message = getattr(exc, "message", None) or str(exc)
    return f"HTTP {status}: {message}" if status else message


def _short(status: Any) -> str:
    short = getattr(status, "short", None)
    return str(short if short is not None else status)


def _oldest_first(obj: ModelResource | TrainingSession) -> tuple[datetime, str]:
    return _aware(obj.created_at), obj.id


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def _is_id(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _s(count: int) -> str:
    return "" if count == 1 else "s"


__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_ORPHANS_FOUND",
    "EXIT_USAGE",
    "Orphan",
    "OrphanError",
    "StackState",
    "StopResult",
    "export_stack",
    "find_orphans",
    "format_age",
    "format_line",
    "held_ids",
    "list_stacks",
    "load_state_file",
    "parse_state",
    "stop_orphans",
    "summary",
]
