"""Crash points: a one-resource `pulumi up` killed right before and right after each of its create journal's
writes, on each store.

What it proves is the write order stated in :mod:`pulumi_together_rl.ownership`: an interrupted ``pulumi up``
never bills a second GPU and never touches another owner's object, whatever write it died after. How:

1. **the count**: one ``pulumi up`` of a one-resource stack (``tests/e2e/projects/twins`` with ``count: 1``) through
   the real Pulumi CLI, its provider process logging every store write (:mod:`harness.crashshim`: a
   ``sitecustomize`` on the ``PYTHONPATH`` of that one command wraps the stores' ``create``, ``swap`` and
   ``remove`` from outside; the package has no kill switch). That up's writes, labelled (:func:`labels`), are the
   crash points.
2. **each k**: a fresh stack on a fresh machine (:class:`harness.runner.Runner`), a colleague's look-alike of the
   declared object made by hand first (another owner's), then the ``pulumi up`` whose provider stops itself right
   after its k-th write (SIGSTOP inside the write's lock: nothing of it runs after that write; or right before
   it: the store as after write k-1, and what the process did since, a POST answered say, lost), and the harness
   SIGKILLs the machine at once (the CLI first, then the language host and the provider:
   :meth:`~harness.runner.Runner.kill`, a CI runner lost), which leaves what a killed CLI leaves (the stack's lock,
   a pending create). Then what comes
   next, on that machine (the local journal is its own): one ``python -m pulumi_together_rl recover --stack S
   --force`` (``--force``: the harness has just killed that run, so its young lock is no run at work), one
   ``pulumi up``, and the orphan finder (``python -m pulumi_together_rl orphans --stack S``).
3. **the judgement** (:func:`judge`): the up succeeds; exactly one object was ever made for the declaration
   (never a second POST that made one, even one later stopped), it is active and the state holds it (recorded,
   or taken over by id); the state holds no pending operation; the colleague's object is active and was never
   written to (no request but a GET names it); the orphan finder names no object but the colleague's (nothing
   billed that no state names).

The stores (:data:`STORES`): this machine's folder (the stack's backend a ``file://`` folder), a ``file://``
journal (``TOGETHER_RL_JOURNAL_URL``: a shared mount), S3 (moto, the journal beside the stack's state in the
bucket), Azure Blob (Azurite, ``TOGETHER_RL_JOURNAL_URL=azblob://...``). Google Cloud Storage is not among them:
fake-gcs-server refuses the object PUT of the XML API that obstore writes with (``tests/unit/test_bucket_store.py``
shows it), so the journal's first-use check refuses that store and no create gets as far as its entry.

The leases are 5 s (``TOGETHER_RL_LEASE_SECONDS``): a killed run's lease in a bucket is waited out by ``recover``
and the next ``up`` (a folder's ``flock`` shows at once that its holder is dead). A renewal comes every 5/6 s
of a create, so a slow machine's count may hold a renewal; each crash point's line says which write it was.

``--provider-only`` kills the provider process alone (it SIGKILLs itself; the OOM killer's way), its CLI living
on to end the up as it does: the engine then records a failed create, not a pending one. Not part of the default
enumeration: after write 9 (done) it makes the next ``up`` create a second object (the first, named by its done
entry, is reported by the orphan finder), a gap the write order alone does not close
(:mod:`pulumi_together_rl.ownership`, item 6).

``python -m harness.crashpoints [--stores local,file,s3,azure] [--ks 6,7,9] [--after-only] [--provider-only]``
(``make crashpoints``) runs the full enumeration and prints the figures; ``tests/e2e/test_crashpoints.py`` runs a slice of it in the release tier.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx

from .bucket import Bucket, S3Server
from .cli import RESOURCE_GONE, Result, provide
from .runner import Runner, descendants

ROOT = Path(__file__).resolve().parents[1]
SHIM = Path(__file__).resolve().parent / "crashshim"
"""The folder put first on the killed command's ``PYTHONPATH``: its ``sitecustomize`` counts and stops."""
PROGRAM = ROOT / "tests" / "e2e" / "projects" / "twins"
CONFIG = {"count": 1}
"""One model resource, ``gpu-0``."""
RESOURCE = "gpu-0"
RESOURCES = "/v1/rl/model-resources"
REQUEST = {"base_model": "Qwen/Qwen3.5-4B"}
"""What the colleague POSTs by hand: the declared object's look-alike (the program's ModelResourceArgs)."""
LEASE = {"TOGETHER_RL_LEASE_SECONDS": "5"}
API_KEY = "crashpoints-key-not-a-secret"
LEFT_PENDING = f"left the pending create of {RESOURCE}: this machine's create journal has no entry of it"
"""What ``recover`` says when it leaves a pending create that no entry of this machine's journal accounts for."""
KILL_TIMEOUT = 180.0
"""Seconds the killed `up` gets to reach its k-th write."""


# ------------------------------------------------------------------------------------------------ the writes


@dataclasses.dataclass(frozen=True)
class Write:
    """One store write of the provider process, as the shim logged it."""

    pid: int
    n: int
    op: str
    key: str
    landed: bool
    data: Any
    before: bool = False
    """The mark of a process stopped right before this write (not made)."""


def read_log(path: Path) -> list[Write]:
    if not path.exists():
        return []
    return [Write(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def labels(writes: Sequence[Write]) -> list[str]:
    """Each write in words: which object (probe, entry, claim) and, for an entry's swap, what it changed (the
    send, the id, done, the release, or nothing but the lease's beat: a renewal)."""
    last: dict[str, Any] = {}
    out: list[str] = []
    for write in writes:
        area = write.key.split("/journal/", 1)[-1].split("/", 1)[0] if "/journal/" in write.key else ""
        area = area or write.key.split("/", 1)[0]
        refused = "" if write.landed else " (refused)"
        if area.startswith("probe"):
            out.append(f"probe {write.op}{refused}")
        elif area.startswith("claim"):
            out.append(f"claim {write.op}{refused}")
        elif area.startswith("entries") or area.startswith("entr"):
            if write.op == "create":
                out.append(f"entry created ({(write.data or {}).get('state')}, its send){refused}")
            elif write.op == "remove":
                out.append(f"entry removed{refused}")
            else:
                before, after = last.get(write.key) or {}, write.data or {}
                out.append(f"entry {_change(before, after)}{refused}")
            if isinstance(write.data, dict):
                last[write.key] = write.data
        else:
            out.append(f"{write.op} {write.key}{refused}")
    return out


def _change(before: dict[str, Any], after: dict[str, Any]) -> str:
    said: list[str] = []
    if after.get("id") and after.get("id") != before.get("id"):
        said.append("the id")
    if len(after.get("sends") or []) != len(before.get("sends") or []):
        said.append("a send")
    if after.get("answered_at") and after.get("answered_at") != before.get("answered_at"):
        said.append("answered")
    if after.get("state") != before.get("state"):
        said.append(str(after.get("state")))
    if after.get("note") and after.get("note") != before.get("note"):
        said.append("a note")
    held_before = (before.get("lease") or {}).get("holder")
    held_after = (after.get("lease") or {}).get("holder")
    if held_before and not held_after:
        said.append("released")
    elif held_after and held_after != held_before:
        said.append("lease taken")
    return ", ".join(said) if said else "renewal"


# ------------------------------------------------------------------------------------------------ the stores


@dataclasses.dataclass(frozen=True)
class Store:
    """One store the journal is exercised on: how a machine is set up to use it (before ``stack init``)."""

    name: str
    setup: Callable[[Runner, Path], None]
    machine_only: bool = False
    """The journal is this machine's folder: ``recover`` cannot tell that no other machine's run made what a
    pending create with no entry stands for, so it leaves that pending create (saying so) rather than drop it."""


def _file_backend(runner: Runner, root: Path) -> None:
    """The stack's state in a folder (a ``file://`` backend): no bucket beside it, so the journal is elsewhere."""
    backend = root / "backend"
    backend.mkdir(parents=True, exist_ok=True)
    runner.run("login", f"file://{backend}", stack=False)


def _local(runner: Runner, root: Path) -> None:
    _file_backend(runner, root)  # the journal: this machine's own folder (XDG_STATE_HOME of the runner)


def _file_url(runner: Runner, root: Path) -> None:
    _file_backend(runner, root)
    shared = root / "journals" / runner.name  # each crash point's own (see _s3)
    shared.mkdir(mode=0o700, parents=True, exist_ok=True)
    runner.env["TOGETHER_RL_JOURNAL_URL"] = f"file://{shared}"


def _s3(runner: Runner, root: Path) -> None:
    # Each crash point's state (and so its journal, beside it) under a prefix of its own: one journal shared by
    # the points would hold the entries of earlier points' killed creates of the same request, whose open POST
    # windows (the emulator forgets their objects between points) rightly make a later point's match ambiguous.
    runner.bucket = dataclasses.replace(runner.bucket, prefix=f"state-{runner.name}")
    runner.login()  # the stack's state in the bucket; the journal beside it, found without configuration


def _azure(container: Any) -> Callable[[Runner, Path], None]:
    def setup(runner: Runner, root: Path) -> None:
        _file_backend(runner, root)
        runner.env.update(container.env)
        runner.env["TOGETHER_RL_JOURNAL_URL"] = container.store_url(f"journal-{runner.name}")  # see _s3

    return setup


STORES = ("local", "file", "s3", "azure")


# ------------------------------------------------------------------------------------------------ one crash point


@dataclasses.dataclass
class Outcome:
    """What one crash point did and what came of it."""

    store: str
    k: int
    write: str
    killed: bool
    """The provider process was SIGKILLed (frozen) right after its k-th write."""
    recovered: bool
    """The judgement held after the one ``recover`` and the next ``up``."""
    seconds: float
    how: str = ""
    """How the next up got its object: taken over by id, by a match, or made (the killed run sent nothing)."""
    failures: list[str] = dataclasses.field(default_factory=list)
    transcript: str = ""
    before: bool = False
    """Killed right before the k-th write instead of right after it."""
    provider_only: bool = False
    """The provider process alone was killed (its CLI lived on), not its whole machine."""

    @property
    def point(self) -> str:
        alone = ", the provider alone" if self.provider_only else ""
        return f"{'before' if self.before else 'after'} write {self.k} ({self.write}{alone})"


class Lab:
    """The servers and the CLI one enumeration runs against, and a counter of the stacks it makes."""

    def __init__(self, emulator: Any, bucket: Bucket, bin_dir: str, root: Path) -> None:
        self.emulator = emulator
        self.bucket = bucket
        self.bin_dir = bin_dir
        self.root = root
        self.made = 0

    def runner(self, store: Store, name: str) -> Runner:
        self.made += 1
        where = self.root / store.name
        runner = Runner(
            PROGRAM, where / f"machine{self.made}", self.emulator, self.bucket, bin_dir=self.bin_dir, name=name,
            **LEASE,
        )  # fmt: skip
        store.setup(runner, where)
        runner.init(CONFIG)
        return runner


def killed_up(
    runner: Runner, log: Path, k: int | None, *, before: bool = False, provider_only: bool = False
) -> tuple[Result | None, Write | None]:
    """``pulumi up`` with the shim on its ``PYTHONPATH``: counted; ``k``: its provider frozen right after its
    k-th write (``before``: right before it) and the machine SIGKILLed then (the write, and None for a result),
    or the up's result when it ended before a k-th write. ``provider_only``: the provider SIGKILLs itself there
    and its CLI lives on (the OOM killer's way): the up is let finish as it does."""
    mark = log.with_suffix(".mark")
    saved = dict(runner.env)
    runner.env.update(
        PYTHONPATH=os.pathsep.join([str(SHIM), *filter(None, [saved.get("PYTHONPATH")])]),
        CRASHPOINT_LOG=str(log),
        CRASHPOINT_MARK=str(mark),
        **({f"CRASHPOINT_KILL_{'BEFORE' if before else 'AT'}": str(k)} if k is not None else {}),
        **({"CRASHPOINT_SIGNAL": "KILL"} if provider_only else {}),
    )
    try:
        running = runner.start_up()
    finally:
        runner.env.clear()
        runner.env.update(saved)
    deadline = time.monotonic() + KILL_TIMEOUT
    while not mark.exists():
        if running.process.poll() is not None or time.monotonic() > deadline:
            if running.process.poll() is None:
                runner.kill()
                raise AssertionError(
                    f"the up did not reach write {k} in {KILL_TIMEOUT:g} s:\n{running.output}"
                )
            return running.finish(), None
        time.sleep(0.01)
    [line] = [json.loads(text) for text in mark.read_text().splitlines() if text.strip()]
    frozen = Write(**line)
    if provider_only:
        running.finish(timeout=KILL_TIMEOUT)  # the CLI sees its plugin gone and ends the up as it does
    else:
        # The CLI first, so that nothing it could record (a plugin gone, a failed create) is recorded: the machine
        # goes down with the provider frozen right at its crash point.
        with contextlib.suppress(ProcessLookupError):
            os.kill(running.pid, signal.SIGKILL)
    runner.kill()  # the machine goes down: the frozen provider, the language host, all at once
    if descendants({frozen.pid}):
        raise AssertionError(f"the provider process {frozen.pid} outlived the machine's SIGKILL")
    return None, frozen


def crash_at(
    lab: Lab, store: Store, k: int, expected: str, *, before: bool = False, provider_only: bool = False
) -> Outcome:
    """The up killed right after its k-th write (``before``: right before it; ``expected``: what that write is),
    then one ``recover``, one ``up`` and the orphan finder, judged."""
    started = time.monotonic()
    control = lab.emulator.control
    control.reset()
    when = ("before" if before else "after") + ("-alone" if provider_only else "")
    runner = lab.runner(store, f"crash-{store.name}-{when}-{k}")  # a stack of its own for each crash point
    colleague = post_by_hand(lab.emulator)
    control.clear_requests()
    log = runner.root / f"writes-{k}.jsonl"
    finished, frozen = killed_up(runner, log, k, before=before, provider_only=provider_only)
    outcome = Outcome(store.name, k, expected, killed=frozen is not None, recovered=False, seconds=0.0)
    outcome.before, outcome.provider_only = before, provider_only
    transcript: list[str] = []
    if frozen is None:
        outcome.failures.append(f"the up ended before its write {k}: {finished}")
    else:
        written = labels(read_log(log))
        done = k - 1 if before else k
        if len(written) != done:
            outcome.failures.append(f"{len(written)} writes made before the kill, not {done}")
        # The write it died at, in words: logged, or (right before it) as the mark says it would have been.
        at = labels([*read_log(log), *([dataclasses.replace(frozen, landed=True)] if before else [])])
        outcome.write = at[k - 1] if len(at) >= k else outcome.write
        pids = {w.pid for w in read_log(log)} - {frozen.pid}
        if pids:
            outcome.failures.append(
                f"writes came from processes beside the killed provider {frozen.pid}: {pids}"
            )
        recovered = runner.module("recover", "--stack", runner.name, "--force")
        transcript.append(f"$ recover -> {recovered.returncode}\n{recovered.output}")
        if recovered.returncode != 0:
            outcome.failures.append(f"recover failed ({recovered.returncode})")
        rerun = runner.up(check=False)
        transcript.append(f"$ pulumi up -> {rerun.returncode}\n{rerun.output}")
        if rerun.returncode != 0:
            outcome.failures.append(f"the next up failed ({rerun.returncode})")
        outcome.how = _how(recovered.stdout, rerun.output)
        # This machine's journal cannot speak for another machine's run: a pending create of a run that wrote no
        # entry is left, and said so (the one residue the judgement allows, only there and only then).
        entry_written = any(w.startswith("entry") for w in written[:done])
        left = store.machine_only and not entry_written and LEFT_PENDING in recovered.stdout
        if left:
            outcome.how += "; recover left the pending create (no entry in this machine's journal)"
        orphans = runner.module("orphans", "--stack", runner.name)
        transcript.append(f"$ orphans -> {orphans.returncode}\n{orphans.output}")
        outcome.failures += judge(lab.emulator, runner, colleague, orphans, pending_left=left)
    outcome.recovered = outcome.killed and not outcome.failures
    outcome.seconds = time.monotonic() - started
    outcome.transcript = "\n".join(transcript)
    runner.kill()
    return outcome


def _how(recovered: str, rerun: str) -> str:
    """How the declaration got its one object after the crash, in the words of ``recover`` and the next up."""
    if "imported " in recovered and "into the state" in recovered:
        return "imported by id by recover"
    if "taking it over" in rerun:
        return "taken over"
    if "created" in rerun:
        return "created"
    return "the up had nothing to do (recover left the state whole)"


def judge(
    emulator: Any, runner: Runner, colleague: str, orphans: Result, *, pending_left: bool = False
) -> list[str]:
    """What must hold after the crash, the one ``recover`` and the next ``up`` (the module docstring);
    ``pending_left``: the pending create of the declaration may stay (recover left it, saying why)."""
    failures: list[str] = []
    state = emulator.control.state()["model_resources"]
    ours = [o for o in state if o["id"] != colleague]
    theirs = [o for o in state if o["id"] == colleague]
    if len(ours) != 1:
        failures.append(f"{len(ours)} objects made for the declaration, not one: {[o['id'] for o in ours]}")
    active = [o for o in ours if not o["status"].endswith(RESOURCE_GONE)]
    deployment = json.loads(runner.export()).get("deployment") or {}
    pending = deployment.get("pending_operations") or []
    if pending_left:
        pending = [p for p in pending if not p["resource"]["urn"].endswith(f"::{RESOURCE}")]
    if pending:
        failures.append(f"pending operations left: {[p['resource']['urn'] for p in pending]}")
    held = {
        r["urn"].rsplit("::", 1)[-1]: r.get("id")
        for r in deployment.get("resources") or []
        if r.get("custom") and r["type"].startswith(runner.face.type_prefix)
    }
    if len(active) != 1 or held.get(RESOURCE) != active[0]["id"]:
        failures.append(
            f"the state holds {held.get(RESOURCE)}, the active ones are {[o['id'] for o in active]}"
        )
    if not theirs or theirs[0]["status"].endswith(RESOURCE_GONE):
        failures.append(f"the colleague's {colleague} is not active: {theirs}")
    touched = [
        f"{r['method']} {r['path']}"
        for r in emulator.control.requests()
        if colleague in r["path"] and r["method"] != "GET"
    ]
    if touched:
        failures.append(f"the colleague's {colleague} was written to: {touched}")
    unnamed = [o["id"] for o in active if o["id"] in orphans.output]
    if orphans.returncode != 0 or unnamed or colleague not in orphans.output:
        failures.append(f"the orphan finder named {unnamed or 'not the colleague'}: {orphans}")
    return failures


def post_by_hand(emulator: Any) -> str:
    """A colleague's look-alike of the declared object, made by hand with the same key: another owner's."""
    answer = httpx.post(
        emulator.base_url + RESOURCES,
        json=REQUEST,
        headers={"Authorization": f"Bearer {emulator.api_key}"},
        timeout=10,
    )
    answer.raise_for_status()
    return str(answer.json()["id"])


def count(lab: Lab, store: Store) -> list[str]:
    """The crash points of ``store``: the writes of one uninterrupted up of a fresh stack, labelled."""
    lab.emulator.control.reset()
    runner = lab.runner(store, f"count-{store.name}")
    post_by_hand(lab.emulator)
    log = runner.root / "writes-count.jsonl"
    finished, _ = killed_up(runner, log, None)
    assert finished is not None and finished.returncode == 0, str(finished)
    runner.kill()
    return labels(read_log(log))


@dataclasses.dataclass
class Figures:
    """One store's enumeration: its writes, and each crash point's outcome."""

    store: str
    writes: list[str]
    outcomes: list[Outcome]
    seconds: float

    def line(self) -> str:
        after = [o for o in self.outcomes if not o.before]
        before = [o for o in self.outcomes if o.before]

        def part(runs: list[Outcome], when: str) -> str:
            killed = sum(o.killed for o in runs)
            recovered = sum(o.recovered for o in runs)
            return f"{len(runs)} killed {when} a write ({killed} killed, {recovered} recovered)"

        parts = [part(after, "after"), *([part(before, "before")] if before else [])]
        return f"{self.store}: {len(self.writes)} writes; {'; '.join(parts)}; {self.seconds:.0f} s"


def enumerate_store(
    lab: Lab,
    store: Store,
    ks: Sequence[int] | None = None,
    *,
    before: bool = True,
    provider_only: bool = False,
    say: Callable[[str], None] = print,
) -> Figures:
    """Count ``store``'s writes, then crash right after each of ``ks`` (default: every one) and, with ``before``,
    right before each too (the store as after the write before, what the process did since lost with it)."""
    started = time.monotonic()
    writes = count(lab, store)
    say(f"{store.name}: {len(writes)} writes: " + "; ".join(f"{i}. {w}" for i, w in enumerate(writes, 1)))
    outcomes = []
    points = [
        (k, when)
        for k in (ks or range(1, len(writes) + 1))
        for when in ((False, True) if before else (False,))
    ]
    for k, ahead in points:
        expected = writes[k - 1] if k <= len(writes) else "?"
        outcome = crash_at(lab, store, k, expected, before=ahead, provider_only=provider_only)
        state = "recovered" if outcome.recovered else "FAILED: " + "; ".join(outcome.failures)
        say(f"  {outcome.point}: {'killed' if outcome.killed else 'NOT killed'}, {outcome.how}, {state} "
            f"({outcome.seconds:.1f} s)")  # fmt: skip
        if not outcome.recovered:
            say(outcome.transcript)
        outcomes.append(outcome)
    return Figures(store.name, writes, outcomes, time.monotonic() - started)


# ------------------------------------------------------------------------------------------------ the command


@dataclasses.dataclass
class _Emulator:
    base_url: str
    api_key: str
    control: Any


@contextlib.contextmanager
def _emulator() -> Iterator[_Emulator]:
    from pulumi_together_rl.emulator.control import EmulatorControl
    from pulumi_together_rl.emulator.server import EmulatorServer

    timings = dict.fromkeys(
        (
            "resource_pending",
            "resource_creating",
            "resource_stopping",
            "session_creating",
            "session_stopping",
        ),
        0.0,
    )
    with EmulatorServer(timings=timings, api_key=API_KEY) as server:
        control = EmulatorControl(server.base_url)
        try:
            yield _Emulator(server.base_url, API_KEY, control)
        finally:
            control.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.crashpoints", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--stores", default=",".join(STORES), help=f"comma-separated, of {', '.join(STORES)}")
    parser.add_argument("--ks", default="", help="comma-separated write numbers (default: every write)")
    parser.add_argument("--after-only", action="store_true", help="no kills right before a write")
    parser.add_argument(
        "--provider-only",
        action="store_true",
        help="SIGKILL the provider process alone (its CLI lives on and ends the up), not its whole machine",
    )
    args = parser.parse_args(argv)
    stores = [s for s in args.stores.split(",") if s]
    ks = [int(k) for k in args.ks.split(",") if k] or None
    bin_dir, why = provide()
    if bin_dir is None:
        print(f"crashpoints: no Pulumi CLI: {why}", file=sys.stderr)
        return 2
    figures: list[Figures] = []
    with contextlib.ExitStack() as stack:
        emulator = stack.enter_context(_emulator())
        s3 = stack.enter_context(S3Server())
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="crashpoints-")))
        lab = Lab(emulator, s3.bucket(), bin_dir, root)
        for name in stores:
            store = _store(name, stack)
            figures.append(
                enumerate_store(lab, store, ks, before=not args.after_only, provider_only=args.provider_only)
            )
    print("\ncrash points:")
    for figure in figures:
        print("  " + figure.line())
    return 0 if all(o.recovered for f in figures for o in f.outcomes) else 1


STORES_BY_NAME = {
    "local": Store("local", _local, machine_only=True),
    "file": Store("file", _file_url),
    "s3": Store("s3", _s3),
}
"""The stores that need no server of their own beyond the S3 one (Azure's is started by :func:`_store`)."""


def _store(name: str, stack: contextlib.ExitStack) -> Store:
    if name in STORES_BY_NAME:
        return STORES_BY_NAME[name]
    if name == "azure":
        from .azurite import AzuriteServer

        server = AzuriteServer()
        server.start()
        stack.callback(server.close)
        return Store("azure", _azure(server.container()))
    raise SystemExit(f"crashpoints: no store {name!r} (of {', '.join(STORES)})")


if __name__ == "__main__":
    sys.exit(main())
