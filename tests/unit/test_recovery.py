"""The recovery command's decisions (``python -m pulumi_together_rl recover``), on the cheapest layer: a stack
export as the Pulumi CLI writes it, and entries in this test's own create journal folder, left as an interrupted
create leaves them (their lock free) or held as a running create holds them.

What only the CLI shows (the lock, ``--import-pending-creates`` and the next ``up``) is in
``tests/e2e/test_cli_runners.py``."""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time

import pytest

from pulumi_together_rl import backend
from pulumi_together_rl.orphans import states
from pulumi_together_rl.orphans.states import parse_state
from pulumi_together_rl.ownership import journal, recovery, shared

BASE = "https://api.test"
BODY = {"base_model": "Qwen/Qwen3.5-4B", "lora_enabled": True}
BUCKET = backend.locate(environ={"PULUMI_BACKEND_URL": "s3://team-state/pulumi?endpoint=10.0.0.1:9000"})
ELSEWHERE = backend.locate(environ={"PULUMI_BACKEND_URL": "s3://other-state/pulumi"})
RESOURCE = "pulumi-python:dynamic/together:ModelResource"
SESSION = "together-rl:index:TrainingSession"


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


def left(
    name: str, *, sent: bool, ident: str | None = None, stack: str = "dev", where=BUCKET
) -> journal.Entry:
    """An entry as a killed create leaves it: written, maybe POSTed, maybe answered; its lock free."""
    entry = journal.begin("model resource", BASE, BODY, f"organization/sweep/{stack}/{name}", where)
    if sent:
        entry.posting([])
        entry.sending()
    if ident:
        entry.record(ident)
    entry.leave()
    return entry


def test_a_pending_create_whose_id_the_journal_holds_is_imported_with_that_id():
    left("gpu", sent=True, ident="mr-1")

    found = recovery.plan(export([("gpu", RESOURCE)]), journal.entries())

    [decision] = found.decisions
    assert (decision.action, decision.id) == (recovery.Action.IMPORT, "mr-1")
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

    found = recovery.plan(export([("gpu", RESOURCE)]), journal.entries())

    [decision] = found.decisions
    assert decision.action == recovery.Action.CLEAR and "made nothing" in decision.why
    assert found.refresh_args() == ["--clear-pending-creates"]


def test_a_post_sent_with_no_answer_is_left_and_the_reason_says_what_the_next_up_does():
    left("gpu", sent=True)

    found = recovery.plan(export([("gpu", RESOURCE)]), journal.entries())

    [decision] = found.decisions
    assert decision.action == recovery.Action.LEAVE
    assert "next `pulumi up`" in decision.why and "window" in decision.why
    assert found.refresh_args() == []


def test_with_an_ambiguous_one_left_the_others_are_imported_but_nothing_is_cleared():
    """``--clear-pending-creates`` drops every pending create it does not import: with one to leave, the
    ones that made nothing stay too (harmless) rather than the ambiguous one going with them."""
    left("gpu", sent=True, ident="mr-1")
    left("gpu2", sent=True)
    left("gpu3", sent=False)

    found = recovery.plan(
        export([("gpu", RESOURCE), ("gpu2", RESOURCE), ("gpu3", RESOURCE)]), journal.entries()
    )

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


def test_a_pending_create_the_journal_knows_nothing_of_is_left():
    found = recovery.plan(export([("gpu", RESOURCE)]), journal.entries())

    [decision] = found.decisions
    assert decision.action == recovery.Action.LEAVE and "no entry" in decision.why
    assert found.refresh_args() == []


def test_a_pending_create_whose_resource_the_state_already_holds_is_stale_and_cleared():
    left("gpu", sent=True, ident="mr-1")

    found = recovery.plan(export([("gpu", RESOURCE)], [("gpu", RESOURCE, "mr-1")]), journal.entries())

    [decision] = found.decisions
    assert decision.action == recovery.Action.CLEAR and "already holds" in decision.why
    assert found.refresh_args() == ["--clear-pending-creates"]


def test_entries_of_another_stack_another_backend_or_another_kind_are_never_used():
    left("gpu", sent=True, ident="mr-prod", stack="prod")
    left("gpu", sent=True, ident="mr-namesake", where=ELSEWHERE)
    left("trial", sent=True, ident="ts-1")  # a model resource entry: not the session's pending create

    found = recovery.plan(export([("gpu", RESOURCE), ("trial", SESSION)]), journal.entries())

    assert [d.action for d in found.decisions] == [recovery.Action.LEAVE, recovery.Action.LEAVE]
    assert all(not d.entries for d in found.decisions)
    assert [e.id for e in found.others] == ["ts-1"]  # the stack's, shown, named by no pending create


def test_a_live_create_of_the_stack_refuses_in_one_sentence_naming_whose_it_is():
    """A running create holds its entry (its flock): recovery must not clear the lock of a run at work."""
    held = journal.begin("model resource", BASE, BODY, "organization/sweep/dev/gpu", BUCKET)
    try:
        found = recovery.plan(export([("gpu", RESOURCE)]), journal.entries())
        assert [e.path for e in found.live] == [held.path]

        sentence = str(recovery.refused("dev", found.live))
        assert re.fullmatch(
            r"recovering stack \(dev\): a create of it is live: .+\. Let that run .+\.", sentence
        )
        assert "organization/sweep/dev/gpu" in sentence and f"pid {held.process.pid}" in sentence
    finally:
        held.release()
    assert not recovery.plan(export([("gpu", RESOURCE)]), journal.entries()).live  # released: over


def test_a_live_create_of_another_stack_is_not_this_stacks_business():
    held = journal.begin("model resource", BASE, BODY, "organization/sweep/prod/gpu", BUCKET)
    try:
        assert not recovery.plan(export([("gpu", RESOURCE)]), journal.entries()).live
    finally:
        held.release()


def test_the_report_shows_the_inputs_without_the_engines_own_or_a_secret():
    secret = {recovery.SECRET_SIG: "1b47061264138c4ac30d75fd1eb44270", "ciphertext": "v1:abc:def"}
    left("gpu", sent=True, ident="mr-1")
    found = recovery.plan(export([("gpu", RESOURCE)], wandb_api_key=secret), journal.entries())

    text = "\n".join(recovery.report_lines(found))

    assert "pending create of model resource gpu" in text and '"base_model": "Qwen/Qwen3.5-4B"' in text
    assert '"wandb_api_key": "[secret]"' in text
    assert "ciphertext" not in text and "v1:abc" not in text and "__provider" not in text
    assert "import mr-1" in text


@contextlib.contextmanager
def renewed(entry: journal.Entry):
    """``entry``'s lease renewed every 0.2 s, as a create at work renews it (from a thread of its own, so that the
    lease seconds of the test, not the process's renewal thread's pace, decide)."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(0.2):
            entry.shared.renew(entry)

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield entry
    finally:
        stop.set()
        thread.join()


@pytest.mark.parametrize("report", [True, False])
def test_the_command_refuses_or_reports_a_live_create_before_touching_the_stack(report, monkeypatch, capsys):
    """Nothing runs after the export while a create is live: not `pulumi cancel`, not `pulumi refresh`; a lease
    renewed all along is still live once its length has passed, and refused then."""
    monkeypatch.setenv(shared.ENV_LEASE, "1")
    ran: list[list[str]] = []
    monkeypatch.setattr(states, "export_stack", lambda stack, **_: export([("gpu", RESOURCE)]))
    monkeypatch.setattr(states, "_pulumi", lambda args, **_: ran.append(args) or "")
    held = journal.begin("model resource", BASE, BODY, "organization/sweep/dev/gpu", BUCKET)
    try:
        with renewed(held):
            status = recovery.run("dev", report=report)
    finally:
        held.release()

    out, err = capsys.readouterr()
    assert ran == []
    if report:
        assert status == recovery.EXIT_OK and "recover refuses while it runs" in out
    else:
        said = [line for line in err.splitlines() if not line.startswith("create journal: ")]
        assert status == recovery.EXIT_REFUSED and said[0].startswith(
            "error: recovering stack (dev): a create"
        )
        assert "waiting up to" in out  # its lease was waited for first


def test_a_lease_nobody_renews_any_more_is_waited_out_on_the_stores_clock_then_the_stack_is_recovered(
    monkeypatch, capsys
):
    """A runner thrown away mid-create leaves its entry held by a lease that nobody renews: not a run at work.
    The command waits for it to run out (at most its length, judged on the store's clock, not two minutes more)
    and then recovers the stack; it neither refuses at once nor clears the lock while the lease lives."""
    monkeypatch.setenv(shared.ENV_LEASE, "1")
    ran: list[tuple[float, list[str]]] = []
    monkeypatch.setattr(states, "export_stack", lambda stack, **_: export([("gpu", RESOURCE)]))
    monkeypatch.setattr(states, "_pulumi", lambda args, **_: ran.append((time.monotonic(), args)) or "")
    gone = journal.begin("model resource", BASE, BODY, "organization/sweep/dev/gpu", BUCKET)
    gone.posting([])
    gone.sending()
    gone.record("mr-1")
    shared._unhold(gone)  # its process is gone: nothing renews the lease from here on
    abandoned = time.monotonic()

    status = recovery.run("dev", report=False)

    out, err = capsys.readouterr()
    assert status == recovery.EXIT_OK, err
    assert "waiting up to" in out and "-> import mr-1" in out
    [(cancelled, cancel), (_, refresh)] = ran
    assert cancel[0] == "cancel" and "--import-pending-creates" in refresh
    # Not before the lease (1 s) and the clock's margin ran out, and well before two minutes more.
    assert 1.0 + shared.CLOCK_MARGIN - 1.0 <= cancelled - abandoned < 10.0


def test_an_id_the_refresh_recorded_is_reported_imported_and_its_entry_marked_done():
    entry = left("gpu", sent=True, ident="mr-1")
    found = recovery.plan(export([("gpu", RESOURCE)]), journal.entries())

    lines = recovery.outcome_lines(found, export([], [("gpu", RESOURCE, "mr-1")]))

    assert lines == ["imported model resource mr-1 into the state as gpu"]
    [now] = [e for e in journal.entries() if e.path == entry.path]
    assert now.state == journal.State.DONE  # the state is the record now: never taken over again


def test_a_pending_create_the_refresh_dropped_without_recording_it_keeps_its_entry_for_the_next_up():
    """A CLI whose `--import-pending-creates` drops the pending create without recording the resource: the entry
    must stay unfinished, or the next `pulumi up` would not take the object over and would make a second one."""
    entry = left("gpu", sent=True, ident="mr-1")
    found = recovery.plan(export([("gpu", RESOURCE)]), journal.entries())

    [line] = recovery.outcome_lines(found, export([]))

    assert "the next `pulumi up` takes it over from the create journal by that id" in line
    [now] = [e for e in journal.entries() if e.path == entry.path]
    assert (now.state, now.id) == (journal.State.CREATED, "mr-1")
    assert journal.interrupted("model resource", BASE, BODY, entry.owner, BUCKET.identity) != []


def test_what_the_refresh_left_pending_is_reported_left():
    left("gpu", sent=True, ident="mr-1")
    left("gpu2", sent=True)
    left("gpu3", sent=False)
    found = recovery.plan(
        export([("gpu", RESOURCE), ("gpu2", RESOURCE), ("gpu3", RESOURCE)]), journal.entries()
    )

    lines = recovery.outcome_lines(
        found, export([("gpu2", RESOURCE), ("gpu3", RESOURCE)], [("gpu", RESOURCE, "mr-1")])
    )

    assert lines[0] == "imported model resource mr-1 into the state as gpu"
    assert lines[1].startswith("left the pending create of gpu2: its POST was sent")
    assert lines[2].startswith("left the pending create of gpu3 (its create was stopped before its POST")
    assert "run this command again after the next `pulumi up`" in lines[2]
