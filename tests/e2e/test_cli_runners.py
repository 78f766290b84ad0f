"""Runners through the real CLI, with the stack's state in a bucket of the S3-compatible server the suite starts
(:mod:`harness.bucket`) and the create journal beside it, found there without configuration (no
``TOGETHER_RL_JOURNAL_URL``): machines of their own (:mod:`harness.runner`), killed and thrown away as machines
are, then another machine (its own home, so its own local journal) that runs the recovery command (``python -m
pulumi_together_rl recover``) and the next ``pulumi up``.

What is judged: the emulator's objects (exactly one, never a second GPU, a colleague's never taken), the stack's
state as ``pulumi stack export`` gives it (the object recorded, no pending operation), a preview with no changes,
and the bucket's own keys (the stack's lock, the journal's entries, read with plain HTTP). The recovery command's
decisions on every case are in ``tests/unit/test_recovery.py``.

The runners' leases are 5 s (``TOGETHER_RL_LEASE_SECONDS`` in their environment) instead of 30: a runner thrown
away holds its declaration (and ``recover``) up for its lease, and the tests wait it out.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from harness.bucket import read_object
from harness.cli import active, wait_until
from harness.faces import DYNAMIC, PLUGIN
from harness.runner import GITHUB_SIGKILL_AFTER, GITHUB_SIGTERM_AFTER

from .test_cli_ownership import post_by_hand

RESOURCES = "/v1/rl/model-resources"
CONFIG = {"sessions": 1, "loraRanks": [8]}
REQUEST = {
    "base_model": "Qwen/Qwen3.5-4B",
    "compute_config": {"num_generator_replicas": 1},
    "lora_enabled": True,
}
"""The sweep example's model resource, as its create sends it."""
LEASE = {"TOGETHER_RL_LEASE_SECONDS": "5"}
CREATE_REQUESTS = 11
"""Requests to the journal's keys per create, at most (measured: 24 for the sweep's two creates and the probe,
see the test that counts them): five writes of its entry (intent, POST, sent, answered with the id, done), the
id's claim, three or four listings of its request's entries (prune, live leases, interrupted, rivals) and a read
of what changed since."""
PROBE_REQUESTS = 6
"""Once per process, before its first create: the store's check and clock (two creates of one key, a swap on its
current version and one on its stale version, a read, a removal)."""
JOURNAL = ".together-rl/journal"
"""Where the journal is in a bucket backend: beside the CLI's ``.pulumi/``."""


def pending(runner) -> list[dict]:
    return json.loads(runner.export())["deployment"].get("pending_operations") or []


def locks(runner) -> list[str]:
    return [
        key for key in runner.bucket.keys(f"{runner.bucket.prefix}/.pulumi/locks/") if key.endswith(".json")
    ]


def journal_entries(bucket) -> list[dict]:
    """The create journal's entries in the bucket, beside the state (read with moto's own client library, not
    the journal's code)."""
    found = []
    for key in bucket.keys(f"{bucket.prefix}/{JOURNAL}/entries/"):
        data = read_object(bucket, key)
        if data is not None:
            found.append(json.loads(data))
    return found


def model_resources(emulator) -> list[dict]:
    return emulator.control.state()["model_resources"]


def answered(emulator) -> bool:
    """The model resource's POST was answered: the object exists (and a second for the answer to arrive)."""
    if not model_resources(emulator):
        return False
    time.sleep(1.0)
    return True


def github_cancel_watching_the_journal(runner, running, ident: str) -> tuple[float | None, object]:
    """GitHub's cancel of ``running`` (:meth:`harness.runner.Runner.github_cancel`, in a thread), the journal's
    entries read from the bucket meanwhile: the seconds from just before the SIGINT until an entry records
    ``ident`` with its lease released (None: not while the sequence ran), and the command's result."""
    outcome: dict[str, object] = {}
    cancel = threading.Thread(target=lambda: outcome.update(result=runner.github_cancel(running)))
    sigint = time.monotonic()
    cancel.start()
    released = None
    while cancel.is_alive() and released is None:
        entries = journal_entries(runner.bucket)
        if any(e.get("id") == ident and not (e.get("lease") or {}).get("holder") for e in entries):
            released = time.monotonic() - sigint
        else:
            time.sleep(0.05)
    cancel.join(timeout=60)
    return released, outcome.get("result")


KILLS = [("sigkill", DYNAMIC), ("github-cancel", PLUGIN)]
"""Each kill on one face (the recovery is the core's; the faces alternate so that both stay covered)."""


@pytest.mark.parametrize(("how", "face"), KILLS, ids=[f"{how}-{face}" for how, face in KILLS])
def test_a_runner_thrown_away_mid_create_then_the_next_runner_recovers_and_its_up_leaves_one_object(
    runners, emulator, how, face
):
    """A runner's `pulumi up` dies while its GPU provisions, after the POST was answered: its whole process tree
    SIGKILLed (a machine going down), or GitHub's cancel sequence (SIGINT, SIGTERM 7.5 s later, SIGKILL of the
    tree 2.5 s after); then the runner is thrown away (its folders, and any local journal, deleted). The engine
    leaves a pending create (and, killed, the stack locked) in the bucket. Another runner, which shares only the
    bucket and the repository's stack file, runs `recover`: it waits out the killed runner's lease (a thrown-away
    runner renews nothing; the cancelled one released its lease as its first act) and clears both, the journal in
    the bucket keeping the id; its next `up` takes the object over by it, makes nothing, and records it.

    GitHub's cancel, read in the bucket as it runs: the entry holds the id from the POST's answer on (before the
    SIGINT: a runner lost at any moment after the answer loses nothing), and its lease is released (holder null)
    once the SIGTERM ends the run, well before the SIGKILL, so the next runner does not wait for it. The SIGINT
    alone releases nothing: the engine cancels with the create still at work, a live run."""
    emulator.control.configure(timings={"resource_pending": 30.0})
    first = runners("sweep", face=face, **LEASE).init(CONFIG)
    second = runners(like=first, **LEASE)  # the next job's machine: a checkout of the same repository
    up = first.start_up()
    wait_until(lambda: answered(emulator), 120, "the model resource's POST to be answered")
    [made] = model_resources(emulator)
    if how == "sigkill":
        first.kill()
    else:
        [entry] = [e for e in journal_entries(first.bucket) if e["kind"] == "model resource"]
        assert entry["id"] == made["id"] and entry["lease"]["holder"]  # recorded at the answer, lease held
        started = time.monotonic()
        released, _ = github_cancel_watching_the_journal(first, up, made["id"])
        assert time.monotonic() - started < 12.0  # the whole sequence: 7.5 + 2.5 s, and the reaping
        assert released is not None, journal_entries(first.bucket)
        # Released when the SIGTERM ends the run, well before the SIGKILL: the SIGINT alone cancels the update
        # with the create still at work (its lease stays live, so no `recover` clears a lock it holds).
        assert released < GITHUB_SIGTERM_AFTER + GITHUB_SIGKILL_AFTER, released
        print(
            f"lease released {released:.2f} s after the SIGINT ({released - GITHUB_SIGTERM_AFTER:+.2f} s from the SIGTERM)"
        )
    assert not first.processes()
    first.throw_away()
    assert not first.root.exists()
    [entry] = [e for e in journal_entries(second.bucket) if e["kind"] == "model resource"]
    assert entry["id"] == made["id"]  # what the machine lost, the bucket kept
    assert [p["type"] for p in pending(second)] == ["creating"]  # what the engine left
    if how == "sigkill":
        assert locks(second)  # a SIGTERMed engine unlocks its stack on its way out; a killed one cannot
        # The killed CLI's lock is seconds old: `recover` cannot tell it from a run still at work before it
        # creates anything (its preview, its other resources), so it refuses and changes nothing.
        refused = second.module("recover", "--stack", second.name)
        assert refused.returncode == 4, refused
        [sentence] = [line for line in refused.stderr.splitlines() if line.startswith("error: ")]
        assert "and it is younger than 2 min, so its `pulumi up` may still be at work" in sentence, sentence
        assert sentence.endswith("if it is gone, run this command again with --force."), sentence
        assert locks(second) and [p["type"] for p in pending(second)] == ["creating"]  # nothing changed

    started = time.monotonic()
    # --force: the harness has just killed that runner (its whole process tree, then its folders), so the young
    # lock is provably no run at work. (A cancelled runner's engine unlocked the stack itself: no lock to judge.)
    recovered = second.module("recover", "--stack", second.name, *(["--force"] if how == "sigkill" else []))
    print(f"recover took {time.monotonic() - started:.1f} s")

    assert recovered.returncode == 0, recovered
    # The killed runner's lease (5 s) is waited out if it still lives by now (on a loaded machine it may have run
    # out already: the wait itself is tests/unit/test_recovery.py's); the cancelled runner's was released.
    if how != "sigkill":
        assert "waiting up to" not in recovered.stdout, recovered.stdout
    assert f"-> import {made['id']}: the create journal holds its id" in recovered.stdout
    assert "removed the stack's lock, if it had one" in recovered.stdout
    assert not pending(second) and not locks(second)
    # The pinned CLI (v3.274.1) drops a pending create named by --import-pending-creates without recording the
    # resource: the journal keeps the id, and the next `up` takes the object over by it.
    assert "sweep-gpu" not in second.resources()
    assert "the next `pulumi up` takes it over from the create journal by that id" in recovered.stdout

    emulator.control.configure(timings={"resource_pending": 0.0})
    emulator.control.clear_requests()
    rerun = second.up()
    assert f"create journal: s3://{second.bucket.name}/{second.bucket.prefix}/{JOURNAL}?" in rerun.output
    assert f"model resource {made['id']}: taking it over" in rerun.output

    assert [r["id"] for r in model_resources(emulator)] == [made["id"]]  # never a second GPU
    assert not [r for r in emulator.control.requests() if r["method"] == "POST" and r["path"] == RESOURCES]
    assert second.resources()["sweep-gpu"]["id"] == made["id"]
    assert not pending(second)
    second.preview("--expect-no-changes")
    second.destroy()
    assert active(emulator) == {"model_resources": [], "training_sessions": []}


def test_recover_waits_for_a_live_lease_and_refuses_while_it_is_renewed_and_says_whose(runners, emulator):
    """A `pulumi up` at work on another runner (its GPU provisioning, its lease renewed) is not a runner thrown
    away: `recover` waits for its lease up to the lease's length, sees it renewed, and refuses in one sentence
    naming whose create it is; the stack's lock stays that run's. The report says the same at once and exits 0.
    The run finishes on its own."""
    emulator.control.configure(timings={"resource_pending": 40.0})  # at work through both commands, even slow
    runner = runners("sweep", **LEASE).init(CONFIG)
    other = runners(like=runner, **LEASE)
    up = runner.start_up()
    wait_until(lambda: answered(emulator), 120, "the model resource's POST to be answered")
    working = runner.processes()
    held = locks(runner)
    assert held

    refused = other.module("recover", "--stack", other.name)
    report = other.module("recover", "--stack", other.name, "--report")
    assert up.process.poll() is None  # still at work all along

    assert refused.returncode == 4, refused
    assert "waiting up to" in refused.stdout  # its lease was waited for first
    [sentence] = [line for line in refused.stderr.splitlines() if line.startswith("error: ")]
    assert sentence.startswith(
        f"error: recovering stack ({runner.name}): a create of it is live: model resource"
    )
    assert f"/{runner.name}/sweep-gpu" in sentence
    assert any(f"pid {pid} on " in sentence for pid in working)  # the provider process at work
    assert sentence.endswith("Let that run finish or stop it, then run this command again.")
    assert report.returncode == 0 and "recover refuses while it runs" in report.stdout
    assert locks(runner) == held  # its lock was left alone

    finished = up.finish()
    assert finished.returncode == 0, finished
    [made] = model_resources(emulator)
    assert runner.resources()["sweep-gpu"]["id"] == made["id"] and not pending(runner)
    runner.destroy()


def test_two_stacks_in_one_bucket_creating_at_once_each_get_their_own_object(runners, emulator):
    """Two stacks of one project in one bucket (one journal beside both states), each on its own runner, create
    the same request at the same moment: look-alikes in one journal, under one request key. Each takes its own
    object, neither the other's; both destroy cleanly."""
    emulator.control.configure(timings={"resource_pending": 5.0})
    one = runners("sweep", **LEASE).init(CONFIG)
    two = runners("sweep", **LEASE).init(CONFIG)
    assert one.name != two.name
    ups = [one.start_up(), two.start_up()]
    wait_until(lambda: len(model_resources(emulator)) == 2, 120, "both model resources' POSTs")
    assert all(up.process.poll() is None for up in ups)  # both creates under way at once
    for up in ups:
        finished = up.finish()
        assert finished.returncode == 0, finished
        assert "taking it over" not in finished.output

    mine, theirs = one.resources()["sweep-gpu"]["id"], two.resources()["sweep-gpu"]["id"]
    assert mine != theirs and {mine, theirs} == {r["id"] for r in model_resources(emulator)}
    assert len(journal_entries(one.bucket)) >= 2  # one journal, both stacks' entries in it
    assert not pending(one) and not pending(two)
    one.destroy()
    assert {r["id"] for r in active(emulator)["model_resources"]} == {
        theirs
    }  # one's destroy stopped only one's
    two.destroy()
    assert active(emulator) == {"model_resources": [], "training_sessions": []}


def test_a_colleagues_look_alike_is_never_taken_by_the_next_runner(runners, emulator):
    """A colleague makes the identical resource by hand while runner A's POST is in flight, and A is thrown away
    before the answer (no id recorded; its delayed POST still makes an object). Runner B's `recover` (with
    --force: the harness has just killed A) clears the pending create, the journal keeping the POST's window (a
    POST sent, no answer: ambiguous); B's `up` cannot tell which object is the stack's, so it takes neither, makes
    nothing, stops nothing, and names them. The colleague's object is active and untouched
    at the end. (The plugin face: the names the error gives are the schema's.)"""
    face = PLUGIN
    emulator.control.configure(timings={"resource_pending": 1.0})
    a = runners("sweep", face=face, **LEASE).init(CONFIG)
    b = runners(like=a, **LEASE)
    emulator.control.add_fault(method="POST", path=f"^{RESOURCES}$", status=None, latency=6.0, times=1)
    a.start_up()
    sent = wait_until(
        lambda: [e for e in journal_entries(a.bucket) if e["kind"] == "model resource" and e["sends"]],
        120,
        "A's POST to be sent",
    )
    assert not sent[0]["id"]
    a.throw_away()
    colleagues = post_by_hand(emulator, REQUEST)
    wait_until(lambda: len(model_resources(emulator)) == 2, 30, "A's delayed POST to land")
    [as_made] = [r["id"] for r in model_resources(emulator) if r["id"] != colleagues]
    before = {r["id"] for r in model_resources(emulator)}
    emulator.control.clear_requests()

    # --force: the harness has just thrown runner A away (its process tree SIGKILLed): its CLI's lock is seconds
    # old, which `recover` alone cannot tell from a run at work (the refusal is the first test's).
    recovered = b.module("recover", "--stack", b.name, "--force")
    assert recovered.returncode == 0, recovered
    assert (
        "-> clear it: its POST got no answer and the create journal keeps its window: the next `pulumi up` takes "
        "over what it made if it is the one object that matches within that window" in recovered.stdout
    ), recovered
    rerun = b.up(check=False)

    assert rerun.returncode != 0
    assert colleagues in rerun.output and as_made in rerun.output and "none can be proven" in rerun.output
    assert face.field("adopt_id") in rerun.output
    assert "Traceback" not in rerun.output
    posts = [r for r in emulator.control.requests() if r["method"] == "POST"]
    assert [p["path"] for p in posts if p["path"] == RESOURCES] == []  # nothing made
    assert all(not p["path"].endswith("/stop") for p in posts)  # nothing stopped
    assert "sweep-gpu" not in b.resources()
    touched = [r for r in emulator.control.requests() if colleagues in r["path"] and r["method"] != "GET"]
    assert not touched  # the colleague's object: read at most, never written to
    assert {r["id"] for r in active(emulator)["model_resources"]} == before  # still active, both


def test_a_create_costs_the_bucket_a_few_requests_beside_the_states_own(runners, emulator, s3_server):
    """What the journal in the bucket costs a `pulumi up`: the sweep's two creates (its GPU, one session), with
    the default lease (30 s: renewed every 5 s, so none in a create this short), counted by the S3 server itself.
    Pulumi's own state traffic (``.pulumi/``) is counted apart and not judged."""
    runner = runners("sweep").init(CONFIG)
    with s3_server.recording() as seen:
        runner.up()
    mine = [(method, where) for method, where in seen if where.startswith(f"/{runner.bucket.name}")]
    journal = [(method, where) for method, where in mine if JOURNAL in where]
    state = [
        (method, where) for method, where in mine if "/.pulumi/" in where or "prefix=state/.pulumi" in where
    ]
    kinds: dict[str, int] = {}
    for method, where in journal:
        what = where.split(f"{JOURNAL}/", 1)[1].split("/", 1)[0]
        key = f"{method} {'list ' if 'list-type' in where else ''}{what}"
        kinds[key] = kinds.get(key, 0) + 1
    print(
        f"journal requests for 2 creates: {len(journal)} {sorted(kinds.items())}; state's own: {len(state)}"
    )
    # A renewal (one more write) comes every 5 s of a create; these two take well under that.
    assert len(journal) <= 2 * CREATE_REQUESTS + PROBE_REQUESTS, journal
    assert len([w for m, w in journal if m == "PUT" and "/claims/" in w]) == 2  # one claim per id
    runner.destroy()
