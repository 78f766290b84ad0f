"""The recovery command's decisions (``python -m pulumi_together_rl recover``), on the cheapest layer: a stack
export as the Pulumi CLI writes it, and entries in this test's own create journal, left as an interrupted create
leaves them (released) or held as a running create holds them (its lease renewed).

What only the CLI shows (the lock, ``--import-pending-creates``, the stack's own journal setting, and the next
``up``) is in ``tests/e2e/test_cli_runners.py``."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import threading
import time
import uuid

import pytest
from harness import journals

from pulumi_together_rl import backend
from pulumi_together_rl.orphans import sources, states
from pulumi_together_rl.orphans.states import parse_state
from pulumi_together_rl.ownership import journal, leases, recovery
from pulumi_together_rl.ownership.records import Declaration, State

BASE = "https://api.test"
BODY = {"base_model": "Qwen/Qwen3.5-4B", "lora_enabled": True}
BUCKET = backend.locate(environ={"PULUMI_BACKEND_URL": "s3://team-state/pulumi?endpoint=10.0.0.1:9000"})
ELSEWHERE = backend.locate(environ={"PULUMI_BACKEND_URL": "s3://other-state/pulumi"})
RESOURCE = "pulumi-python:dynamic/together:ModelResource"
SESSION = "together-rl:index:TrainingSession"
SHARED = "the stack's shared journal"


@pytest.fixture(autouse=True)
def _journal_beside_the_state(tmp_path, monkeypatch):
    """The stacks here live in a bucket, so their journal is a shared one: a folder of this machine named by a
    ``file://`` URL stands for it (the same leases and claims; test_shared_journal.py runs them on S3)."""
    monkeypatch.setenv("TOGETHER_RL_JOURNAL_URL", f"file://{tmp_path}/journal")


def urn(name: str, type_: str = RESOURCE, stack: str = "dev") -> str:
    return f"urn:pulumi:{stack}::sweep::{type_}::{name}"


def export(pending: list[tuple[str, str]], resources: list[tuple[str, str, str]] = (), **inputs):
    """A ``pulumi stack export`` of stack dev of project sweep: ``pending`` creates (name, type) and recorded
    ``resources`` (name, type, id)."""
    data = {
        "version": 3,
        "deployment": {
            "resources": [
                {"urn": urn(name, type_), "type": type_, "id": ident, "custom": True}
                for name, type_, ident in resources
            ],
            "pending_operations": [
                {
                    "type": "creating",
                    "resource": {
                        "urn": urn(name, type_),
                        "type": type_,
                        "custom": True,
                        "inputs": {"__provider": "gASVpickled", **BODY, **inputs},
                    },
                }
                for name, type_ in pending
            ],
        },
    }
    return parse_state(json.dumps(data), "stack dev", name="organization/sweep/dev", backend=BUCKET.identity)


def left(name: str, *, sent: bool, ident: str | None = None, stack: str = "dev", where=BUCKET, **more):
    """An entry as a killed create leaves it: its POST maybe sent, maybe answered; its lease released."""
    return journals.left(
        "model resource", BASE, BODY, f"organization/sweep/{stack}/{name}", sent=sent, ident=ident,
        stack_backend=where.identity, **more,
    )  # fmt: skip


def entries():
    return journal.current().entries()


def plan(state, authoritative: str | None = SHARED):
    return recovery.plan(state, entries(), authoritative)


def test_a_pending_create_whose_id_the_journal_holds_is_imported_with_that_id():
    left("gpu", sent=True, ident="mr-1")

    found = plan(export([("gpu", RESOURCE)]))

    [decision] = found.decisions
    assert (decision.action, decision.id, decision.reopen) == (recovery.Action.IMPORT, "mr-1", None)
    # One value per flag: `--import-pending-creates URN ID` would hand ID to `refresh` as its argument.
    assert found.refresh_args() == [
        "--import-pending-creates",
        urn("gpu"),
        "--import-pending-creates",
        "mr-1",
    ]
    assert not found.live


def test_a_create_killed_before_its_post_made_nothing_and_is_cleared():
    left("gpu", sent=False)

    found = plan(export([("gpu", RESOURCE)]))

    [decision] = found.decisions
    assert decision.action == recovery.Action.CLEAR and "made nothing" in decision.why
    assert found.refresh_args() == ["--clear-pending-creates"]


def test_a_post_sent_with_no_answer_is_cleared_and_the_journal_keeps_its_window_for_the_next_up():
    """The pending create carries nothing the journal does not: its entry keeps the POST's window, and the next
    `pulumi up` takes the one match over (or creates anew, or names them). Left in the state, it would stay
    there for good."""
    left("gpu", sent=True)

    found = plan(export([("gpu", RESOURCE)]))

    [decision] = found.decisions
    assert decision.action == recovery.Action.CLEAR
    assert "next `pulumi up`" in decision.why and "window" in decision.why
    assert found.refresh_args() == ["--clear-pending-creates"]


def test_no_entry_in_the_stacks_shared_journal_means_nothing_was_sent_and_it_is_cleared():
    found = plan(export([("gpu", RESOURCE)]), authoritative="s3://team-state/pulumi/.together-rl/journal")

    [decision] = found.decisions
    assert decision.action == recovery.Action.CLEAR and "sent none and made nothing" in decision.why
    assert "s3://team-state/pulumi/.together-rl/journal" in decision.why


def test_no_entry_in_this_machines_folder_proves_nothing_and_is_left():
    found = plan(export([("gpu", RESOURCE)]), authoritative=None)

    [decision] = found.decisions
    assert decision.action == recovery.Action.LEAVE and "no entry" in decision.why
    assert found.refresh_args() == []


def test_with_one_to_leave_the_others_are_imported_but_nothing_is_cleared():
    """``--clear-pending-creates`` drops every pending create it does not import: with one to leave, the
    ones to clear stay too (harmless) rather than the one to leave going with them."""
    left("gpu", sent=True, ident="mr-1")
    left("gpu3", sent=False)

    found = plan(export([("gpu", RESOURCE), ("gpu2", RESOURCE), ("gpu3", RESOURCE)]), authoritative=None)

    assert [d.action for d in found.decisions] == [
        recovery.Action.IMPORT,
        recovery.Action.LEAVE,
        recovery.Action.CLEAR,
    ]
    assert found.refresh_args() == [
        "--import-pending-creates",
        urn("gpu"),
        "--import-pending-creates",
        "mr-1",
    ]


def test_a_pending_create_whose_object_the_state_already_holds_is_stale_and_cleared():
    left("gpu", sent=True, ident="mr-1", state=State.DONE)

    found = plan(export([("gpu", RESOURCE)], [("gpu", RESOURCE, "mr-1")]))

    [decision] = found.decisions
    assert decision.action == recovery.Action.CLEAR and "already holds" in decision.why
    assert decision.reopen is None
    assert found.refresh_args() == ["--clear-pending-creates"]


def test_a_create_marked_done_whose_answer_never_reached_the_engine_is_imported_and_reopened():
    """Killed right after the entry was marked done: the state has the pending create and not the object. The
    declaration's newest entry decides (an older done one, of a create since replaced, is not it)."""
    left("gpu", sent=True, ident="mr-older", state=State.DONE)
    time.sleep(0.05)  # the store's clock of the newest write is later
    newest = left("gpu", sent=True, ident="mr-newest", state=State.DONE)

    found = plan(export([("gpu", RESOURCE)]))

    [decision] = found.decisions
    assert (decision.action, decision.id) == (recovery.Action.IMPORT, "mr-newest")
    assert decision.reopen is not None and decision.reopen.key == newest.key
    assert "marked it done, but the engine was killed before the answer reached the state" in decision.why


def test_a_replacement_whose_answer_never_reached_the_engine_is_cleared_and_its_entry_reopened():
    """Create-before-delete: the state holds the old object under the URN, the replacement's pending create
    carries the new one. The URN is taken, so it is cleared, not imported; the entry is reopened all the same."""
    left("gpu", sent=True, ident="mr-new", state=State.DONE)

    found = plan(export([("gpu", RESOURCE)], [("gpu", RESOURCE, "mr-old")]))

    [decision] = found.decisions
    assert (decision.action, decision.id) == (recovery.Action.CLEAR, "mr-new")
    assert decision.reopen is not None


def test_entries_of_another_stack_another_backend_or_another_kind_are_never_used():
    left("gpu", sent=True, ident="mr-prod", stack="prod")
    left("gpu", sent=True, ident="mr-namesake", where=ELSEWHERE)
    left("trial", sent=True, ident="ts-1")  # a model resource entry: not the session's pending create

    found = plan(export([("gpu", RESOURCE), ("trial", SESSION)]), authoritative=None)

    assert [d.action for d in found.decisions] == [recovery.Action.LEAVE, recovery.Action.LEAVE]
    assert all(not d.entries for d in found.decisions)
    assert [e.entry.id for e in found.others] == ["ts-1"]  # the stack's, shown, named by no pending create


def test_a_live_create_of_the_stack_refuses_in_one_sentence_naming_whose_it_is():
    """A running create holds its entry (its lease): recovery must not clear the lock of a run at work."""
    held = journals.begun("model resource", BASE, BODY, "organization/sweep/dev/gpu", stack_backend=BUCKET)
    try:
        found = plan(export([("gpu", RESOURCE)]))
        assert [e.key for e in found.live] == [held.key]

        sentence = str(recovery.refused("dev", found.live))
        assert re.fullmatch(
            r"recovering stack \(dev\): a create of it is live: .+\. Let that run .+\.", sentence
        )
        assert "organization/sweep/dev/gpu" in sentence and f"pid {os.getpid()}" in sentence
    finally:
        held.release()
    assert not plan(export([("gpu", RESOURCE)])).live  # released: over


def test_a_live_create_of_another_stack_is_not_this_stacks_business():
    held = journals.begun("model resource", BASE, BODY, "organization/sweep/prod/gpu", stack_backend=BUCKET)
    try:
        assert not plan(export([("gpu", RESOURCE)])).live
    finally:
        held.release()


def test_the_report_shows_the_inputs_without_the_engines_own_or_a_secret():
    secret = {recovery.SECRET_SIG: "1b47061264138c4ac30d75fd1eb44270", "ciphertext": "v1:abc:def"}
    left("gpu", sent=True, ident="mr-1")
    found = plan(export([("gpu", RESOURCE)], wandb_api_key=secret))

    text = "\n".join(recovery.report_lines(found))

    assert "pending create of model resource gpu" in text and '"base_model": "Qwen/Qwen3.5-4B"' in text
    assert '"wandb_api_key": "[secret]"' in text
    assert "ciphertext" not in text and "v1:abc" not in text and "__provider" not in text
    assert "import mr-1" in text


# ------------------------------------------------------------------------------------------ the command


@pytest.fixture
def stack(monkeypatch, tmp_path):
    """The command's view of stack dev: its export, its config (``config``: what `pulumi config` gives), its
    backend (a folder, whose locks the test writes), and the pulumi commands it ran."""
    folder = tmp_path / "state"
    (folder / ".pulumi").mkdir(parents=True)
    monkeypatch.setenv("PULUMI_BACKEND_URL", f"file://{folder}")
    ran: list[tuple[float, list[str]]] = []
    view = {"config": {}, "export": export([("gpu", RESOURCE)]), "ran": ran, "folder": folder}
    monkeypatch.setattr(states, "export_stack", lambda name, **_: view["export"])
    monkeypatch.setattr(states, "_pulumi", lambda args, **_: ran.append((time.monotonic(), args)) or "")
    monkeypatch.setattr(sources, "list_stacks", lambda **_: ["organization/sweep/dev"])
    monkeypatch.setattr(sources, "stack_config", lambda name, **_: view["config"])
    return view


def lock(folder, *, age: float, pid: int, host: str | None = None) -> None:
    """A lock of stack dev as the CLI writes it, last written ``age`` seconds ago."""
    path = folder / ".pulumi" / "locks" / "organization" / "sweep" / "dev" / f"{uuid.uuid4()}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"pid": pid, "username": "ci", "hostname": host or socket.gethostname(), "timestamp": "2026"}
    path.write_text(json.dumps(body))
    moment = time.time() - age
    os.utime(path, (moment, moment))


@contextlib.contextmanager
def renewed(held: leases.Holding):
    """``held``'s lease renewed every 0.2 s, as a create at work renews it (from a thread of its own, so that the
    lease seconds of the test, not the process's renewal thread's pace, decide)."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(0.2):
            held.renew()

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield held
    finally:
        stop.set()
        thread.join()


@pytest.mark.parametrize("report", [True, False])
def test_the_command_refuses_or_reports_a_live_create_before_touching_the_stack(
    report, stack, monkeypatch, capsys
):
    """Nothing runs after the export while a create is live: not `pulumi cancel`, not `pulumi refresh`; a lease
    renewed all along is still live once the longest wait has passed, and refused then."""
    monkeypatch.setenv(journal.ENV_LEASE, "1")
    held = journals.begun("model resource", BASE, BODY, "organization/sweep/dev/gpu", stack_backend=BUCKET)
    try:
        with renewed(held):
            status = recovery.run("dev", report=report)
    finally:
        held.release()

    out, err = capsys.readouterr()
    assert stack["ran"] == []
    if report:
        assert status == recovery.EXIT_OK and "recover refuses while it runs" in out
    else:
        said = [line for line in err.splitlines() if not line.startswith("create journal: ")]
        assert status == recovery.EXIT_REFUSED and said[0].startswith(
            "error: recovering stack (dev): a create"
        )
        assert "waiting up to" in out  # its lease was waited for first


def test_a_lease_nobody_renews_any_more_is_waited_out_on_the_stores_clock_then_the_stack_is_recovered(
    stack, bucket, monkeypatch, capsys
):
    """A runner thrown away mid-create leaves its entry in the bucket held by a lease that nobody renews: not a run
    at work. A bucket has no proof of a live writer but the lease, so the command waits for it to run out (its
    length and the probed clock's margin, not two minutes more) and then recovers the stack; it neither refuses at
    once nor clears the lock while the lease lives."""
    monkeypatch.setenv("TOGETHER_RL_JOURNAL_URL", bucket.store_url("team"))
    monkeypatch.setenv(journal.ENV_LEASE, "1")
    gone = journals.begun(
        "model resource", BASE, BODY, "organization/sweep/dev/gpu", ident="mr-1", stack_backend=BUCKET
    )
    leases.forget(gone)  # nothing renews the lease from here on (its process runs: only the clock can tell)
    # `recover` runs in a process of its own: a journal it has not probed yet (this one's was, by the create).
    journal.forget(journal.at(bucket.store_url("team")))
    abandoned = time.monotonic()

    status = recovery.run("dev", report=False)

    out, err = capsys.readouterr()
    assert status == recovery.EXIT_OK, err
    assert "waiting up to" in out and "-> import mr-1" in out
    [(cancelled, cancel), (_, refresh)] = stack["ran"]
    assert cancel[0] == "cancel" and "--import-pending-creates" in refresh
    # Not before the lease (1 s) and the clock's margin ran out, and well before two minutes more.
    assert 1.0 + journal.CLOCK_MARGIN - 1.0 <= cancelled - abandoned < 10.0


@pytest.mark.parametrize("how", ["young", "its process runs here"])
def test_a_lock_that_is_young_or_whose_process_runs_here_is_refused_unless_forced(stack, how, capsys):
    left("gpu", sent=True, ident="mr-1")
    if how == "young":
        lock(stack["folder"], age=5, pid=999_999_999 % 4_000_000, host="a-runner-elsewhere")
    else:
        lock(stack["folder"], age=3600, pid=os.getpid())

    assert recovery.run("dev", report=False) == recovery.EXIT_REFUSED
    err = capsys.readouterr().err
    assert stack["ran"] == []
    assert err.startswith("error: recovering stack (dev): its lock was taken ")
    why = "it is younger than 2 min" if how == "young" else "its process runs on this machine"
    assert why in err and "run this command again with --force" in err

    assert recovery.run("dev", report=False, force=True) == recovery.EXIT_OK
    assert [args[0] for _, args in stack["ran"]] == ["cancel", "refresh"]


def test_an_old_lock_of_a_process_gone_is_removed(stack):
    left("gpu", sent=True, ident="mr-1")
    lock(stack["folder"], age=3600, pid=4_000_001, host="a-runner-thrown-away")
    assert recovery.run("dev", report=False) == recovery.EXIT_OK
    assert [args[0] for _, args in stack["ran"]] == ["cancel", "refresh"]


def test_the_command_reads_the_journal_the_stacks_own_setting_names_and_says_which(
    stack, tmp_path, monkeypatch, capsys
):
    """`pulumi up` wrote to the stack's `together:journalUrl`; the command's own process has no setting (and no
    TOGETHER_RL_JOURNAL_URL): it still reads that journal, says so, and sees the create there."""
    configured = f"file://{tmp_path}/configured"
    monkeypatch.setenv("TOGETHER_RL_JOURNAL_URL", configured)
    left("gpu", sent=True, ident="mr-configured")
    monkeypatch.delenv("TOGETHER_RL_JOURNAL_URL")
    stack["config"] = {"together:journalUrl": configured}

    assert recovery.run("dev", report=True) == recovery.EXIT_OK

    out = capsys.readouterr().out
    assert (
        f"read the create journal in {configured} (stack organization/sweep/dev's together:journalUrl) (the one"
        in out
    )
    assert "-> import mr-configured" in out


def test_a_journal_of_the_stack_that_cannot_be_read_refuses_and_changes_nothing(stack, capsys):
    stack["config"] = {"together:journalUrl": "s3://nowhere/team?endpoint=127.0.0.1:9&disableSSL=true"}
    assert recovery.run("dev", report=False) == recovery.EXIT_FAILED
    err = capsys.readouterr().err
    assert "its create journal in s3://nowhere/team" in err and "cannot be read" in err
    assert "nothing was changed" in err
    assert stack["ran"] == []


def test_an_id_the_refresh_recorded_is_reported_imported_and_its_entry_marked_done():
    seen = left("gpu", sent=True, ident="mr-1")
    found = plan(export([("gpu", RESOURCE)]))

    lines = recovery.outcome_lines(found, export([], [("gpu", RESOURCE, "mr-1")]))

    assert lines == ["imported model resource mr-1 into the state as gpu"]
    [now] = [e for e in entries() if e.key == seen.key]
    assert now.entry.state == State.DONE  # the state is the record now: never taken over again


def test_a_pending_create_the_refresh_dropped_without_recording_it_keeps_its_entry_for_the_next_up():
    """A CLI whose `--import-pending-creates` drops the pending create without recording the resource: the entry
    must stay unfinished, or the next `pulumi up` would not take the object over and would make a second one."""
    seen = left("gpu", sent=True, ident="mr-1")
    found = plan(export([("gpu", RESOURCE)]))

    [line] = recovery.outcome_lines(found, export([]))

    assert "the next `pulumi up` takes it over from the create journal by that id" in line
    [now] = [e for e in entries() if e.key == seen.key]
    assert (now.entry.state, now.entry.id) == (State.CREATED, "mr-1")
    assert journal.interrupted(
        journal.current(), Declaration.of("model resource", BASE, BODY, seen.entry.owner, BUCKET.identity)
    )


def test_the_recovered_entry_is_noted_so_its_take_over_asks_for_no_recovery_again(stack):
    seen = left("gpu", sent=True, ident="mr-1", state=State.DONE)
    assert recovery.run("dev", report=False) == recovery.EXIT_OK
    [now] = [e for e in entries() if e.key == seen.key]
    assert now.entry.state == State.CREATED and recovery.recovered(now.entry.note)
    assert now.left() <= 0  # released


def test_what_the_refresh_left_pending_is_reported_left():
    left("gpu", sent=True, ident="mr-1")
    left("gpu3", sent=False)
    found = plan(export([("gpu", RESOURCE), ("gpu2", RESOURCE), ("gpu3", RESOURCE)]), authoritative=None)

    lines = recovery.outcome_lines(
        found, export([("gpu2", RESOURCE), ("gpu3", RESOURCE)], [("gpu", RESOURCE, "mr-1")])
    )

    assert lines[0] == "imported model resource mr-1 into the state as gpu"
    assert lines[1].startswith("left the pending create of gpu2: this machine's create journal has no entry")
    assert lines[2].startswith("left the pending create of gpu3 (its create was stopped before its POST")
    assert "run this command again after the next `pulumi up`" in lines[2]
