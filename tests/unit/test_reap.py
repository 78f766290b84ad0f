"""``reap``: the objects a stack state holds past their declared deadline, decided and stopped.

The first tests are the decision alone (:func:`pulumi_together_rl.orphans.reap.decide`) over ``pulumi stack
export`` documents written here; the last run the command in this process against the real emulator, with state
files (the stacks through the real Pulumi CLI are tests/e2e/test_reap_cli.py).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from harness.journals import begun

from pulumi_together_rl.__main__ import main
from pulumi_together_rl.client import TogetherRL
from pulumi_together_rl.client.models import ModelResourceCreateRequest, TrainingSessionCreateRequest
from pulumi_together_rl.orphans import reap
from pulumi_together_rl.orphans.finder import Orphan
from pulumi_together_rl.orphans.states import parse_state
from pulumi_together_rl.ours import MODEL_RESOURCE, TRAINING_SESSION

MODEL = "Qwen/Qwen3.5-4B"
RESOURCE = "pulumi-python:dynamic/together:ModelResource"
SESSION = "pulumi-python:dynamic/together:TrainingSession"
PLUGIN_RESOURCE = "together-rl:index:ModelResource"
NOW = datetime(2026, 12, 7, 12, 0, tzinfo=timezone.utc)


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def resource(kind: str, ident: str, name: str, stop_at: datetime | None = None, **outputs) -> dict:
    """One resource of a state, with its deadline (``stop_at``) when given."""
    props = dict(outputs)
    if stop_at is not None:
        props.update(stop_after=iso(stop_at), stop_at=iso(stop_at))
    return {
        "urn": f"urn:pulumi:dev::team::{kind}::{name}",
        "custom": True,
        "id": ident,
        "type": kind,
        "outputs": props,
    }


def state(*resources: dict, stack: str = "dev", pending: list | None = None):
    deployment: dict = {"resources": list(resources)}
    if pending:
        deployment["pending_operations"] = pending
    return parse_state(json.dumps({"version": 3, "deployment": deployment}), f"{stack}.json", name=stack)


def alive(due: reap.Due, status: str = "READY", journal: str | None = None) -> reap.Due:
    """As the command leaves it once the API answered the object (active) and the journals were read."""
    due.live = Orphan(kind=due.kind, id=due.id, status=status, created_at=NOW - timedelta(hours=3))
    due.live.journal = journal
    due.live.journal_label = "a running process on this machine is creating it" if journal else None
    due.live_status = status
    return due


def decided(states, now=NOW, **live) -> dict[str, reap.Due]:
    dues = reap.deadlines(states)
    for due in dues:
        alive(due, **live.get(due.id, {}))
    reap.decide(dues, states, now)
    return {due.id: due for due in dues}


def test_an_object_past_its_deadline_is_stopped_and_one_ahead_is_not():
    dev = state(
        resource(RESOURCE, "mr-past", "gpu", NOW - timedelta(minutes=1)),
        resource(RESOURCE, "mr-ahead", "later", NOW + timedelta(hours=2)),
    )
    found = decided([dev])
    assert found["mr-past"].stop and found["mr-past"].held_back is None
    assert not found["mr-ahead"].stop and found["mr-ahead"].held_back == reap.AHEAD
    assert "its deadline is ahead (in 2 h)" in reap.line(found["mr-ahead"])
    assert reap.line(found["mr-past"]) == (
        "stack dev: model resource gpu (mr-past), stop_after 2026-12-07T11:59:00Z: "
        "--stop stops it: its deadline has passed and it is READY."
    )


def test_only_ids_a_state_holds_with_a_deadline_are_candidates():
    dev = state(
        resource(RESOURCE, "mr-past", "gpu", NOW - timedelta(hours=1)),
        resource(RESOURCE, "mr-none", "free"),  # no deadline
        {"urn": "urn:pulumi:dev::team::pulumi:pulumi:Stack::team-dev", "type": "pulumi:pulumi:Stack"},
    )
    assert [due.id for due in reap.deadlines([dev])] == ["mr-past"]  # a look-alike no state holds: never


def test_the_plugin_faces_camel_case_state_is_read():
    dev = state(
        {
            "urn": "urn:pulumi:dev::team::together-rl:index:ModelResource::gpu",
            "id": "mr-yaml",
            "type": PLUGIN_RESOURCE,
            "outputs": {"stopAfter": "1h", "stopAt": iso(NOW - timedelta(minutes=5)), "status": "READY"},
        }
    )
    (due,) = reap.deadlines([dev])
    assert due.kind == MODEL_RESOURCE and due.words == "stop_after 1h" and due.stop_at < NOW


def test_one_the_state_says_was_stopped_at_its_deadline_needs_nothing():
    dev = state(resource(RESOURCE, "mr-done", "gpu", NOW - timedelta(hours=1), stop_reason="deadline"))
    assert decided([dev])["mr-done"].held_back == reap.STOPPED_AT_DEADLINE


def test_one_that_has_ended_or_is_gone_needs_nothing():
    dev = state(resource(RESOURCE, "mr-gone", "gpu", NOW - timedelta(hours=1)))
    (due,) = reap.deadlines([dev])
    due.live_status = "STOPPED"  # live stays None: the API answered it ended
    reap.decide([due], [dev], NOW)
    assert not due.stop and due.held_back == reap.ENDED


def test_an_object_a_live_create_may_hold_is_never_stopped():
    dev = state(resource(RESOURCE, "mr-past", "gpu", NOW - timedelta(hours=1)))
    found = decided([dev], **{"mr-past": {"journal": "in_flight"}})
    assert not found["mr-past"].stop and found["mr-past"].held_back == reap.IN_FLIGHT


def test_another_stack_holding_it_with_no_deadline_or_a_later_one_keeps_it_running():
    dev = state(resource(RESOURCE, "mr-shared", "gpu", NOW - timedelta(hours=1)))
    for other in (
        state(resource(RESOURCE, "mr-shared", "gpu"), stack="prod"),
        state(resource(RESOURCE, "mr-shared", "gpu", NOW + timedelta(hours=1)), stack="prod"),
    ):
        dues = reap.deadlines([dev, other])
        for due in dues:
            alive(due)
        reap.decide(dues, [dev, other], NOW)
        assert not any(due.stop for due in dues)
        (mine,) = [due for due in dues if due.state is dev]
        assert mine.held_back == reap.HELD_ELSEWHERE and "stack prod" in mine.why
    # A `.get()` reference reads it and does not own it.
    reference = state({**resource(RESOURCE, "mr-shared", "ref"), "external": True}, stack="prod")
    assert decided([dev, reference])["mr-shared"].stop


def test_another_stacks_objects_without_a_deadline_or_with_a_later_one_are_left_alone():
    dev = state(resource(RESOURCE, "mr-past", "gpu", NOW - timedelta(hours=1)))
    prod = state(
        resource(RESOURCE, "mr-prod", "gpu"),
        resource(RESOURCE, "mr-prod-later", "late", NOW + timedelta(days=1)),
        stack="prod",
    )
    found = decided([dev, prod])
    assert [i for i, due in found.items() if due.stop] == ["mr-past"]


def test_a_pending_operation_on_it_holds_it_back():
    gpu = resource(RESOURCE, "mr-past", "gpu", NOW - timedelta(hours=1))
    pending = [{"type": "updating", "resource": {"urn": gpu["urn"], "type": RESOURCE, "id": "mr-past"}}]
    found = decided([state(gpu, pending=pending)])
    assert found["mr-past"].held_back == reap.PENDING and "pulumi cancel" in found["mr-past"].why


def test_a_model_resource_is_stopped_only_when_every_active_session_on_it_is_stopped_too():
    past = NOW - timedelta(hours=1)
    due_session = resource(SESSION, "ts-past", "trial", past)
    later_session = resource(SESSION, "ts-later", "long", NOW + timedelta(hours=1))
    gpu = resource(RESOURCE, "mr-past", "gpu", past)

    both = [state(gpu, due_session)]
    dues = reap.deadlines(both)
    for due in dues:
        alive(due, "RUNNING" if due.kind == TRAINING_SESSION else "READY")
        due.attached = ["ts-past"] if due.kind == MODEL_RESOURCE else []
    reap.decide(dues, both, NOW)
    assert all(due.stop for due in dues)

    held = [state(gpu, due_session, later_session)]
    dues = reap.deadlines(held)
    for due in dues:
        alive(due)
        due.attached = ["ts-later", "ts-past"] if due.kind == MODEL_RESOURCE else []
    reap.decide(dues, held, NOW)
    by_id = {due.id: due for due in dues}
    assert by_id["ts-past"].stop and not by_id["ts-later"].stop
    assert by_id["mr-past"].held_back == reap.HELD_SESSIONS and "ts-later" in by_id["mr-past"].why


# ----------------------------------------------------------------------------- the command, on the emulator


@pytest.fixture
def client(emulator):
    with TogetherRL(api_key=emulator.api_key, base_url=emulator.base_url) as made:
        yield made


def run(capsys, *args: str) -> tuple[int, str, str]:
    try:
        code = main(["reap", *args])
    except SystemExit as exit:  # argparse
        code = exit.code
    out, err = capsys.readouterr()
    return code, out, err


def stops(emulator) -> list[str]:
    return [
        r["path"]
        for r in emulator.control.requests()
        if r["method"] == "POST" and r["path"].endswith("/stop")
    ]


@pytest.fixture
def world(emulator, client, tmp_path):
    """dev.json: a GPU and a session on it past their deadlines, a GPU with a later one; prod.json: a GPU with
    no deadline; a look-alike of the first GPU that no state holds."""
    now = emulator.control.now()
    made = {
        name: client.create_model_resource(ModelResourceCreateRequest(base_model=MODEL)).id
        for name in ("gpu", "later", "prod", "lookalike")
    }
    made["trial"] = client.create_training_session(
        TrainingSessionCreateRequest(model_resources_id=made["gpu"])
    ).id
    past, ahead = now - timedelta(minutes=2), now + timedelta(hours=3)
    dev = tmp_path / "dev.json"
    dev.write_text(
        json.dumps(
            {
                "version": 3,
                "deployment": {
                    "resources": [
                        resource(RESOURCE, made["gpu"], "gpu", past),
                        resource(SESSION, made["trial"], "trial", past),
                        resource(RESOURCE, made["later"], "later", ahead),
                    ]
                },
            }
        )
    )
    prod = tmp_path / "prod.json"
    prod.write_text(
        json.dumps({"version": 3, "deployment": {"resources": [resource(RESOURCE, made["prod"], "p")]}})
    )
    emulator.control.clear_requests()
    return {**made, "files": ["--state", str(dev), "--state", str(prod)]}


def test_a_dry_run_says_what_it_would_stop_and_stops_nothing(emulator, world, capsys):
    code, out, err = run(capsys, *world["files"])
    assert code == 0, err
    assert stops(emulator) == []
    lines = out.splitlines()
    assert any(
        line.startswith(
            f"{world['files'][1]} (stack dev of project team): model resource gpu ({world['gpu']}), stop_after "
        )
        and line.endswith("--stop stops it: its deadline has passed and it is READY.")
        for line in lines
    ), out
    assert any(
        f"training session trial ({world['trial']})" in line and "--stop stops it" in line for line in lines
    )
    assert any(
        f"model resource later ({world['later']})" in line
        and "--stop leaves it: its deadline is ahead" in line
        for line in lines
    )
    assert world["prod"] not in out and world["lookalike"] not in out
    assert lines[-1] == (
        "3 objects with a deadline in 1 stack, 2 past it and running. Dry run: nothing was stopped; run again with "
        "--stop to stop 2."
    )
    assert emulator.api_key not in out + err


def test_stop_without_a_terminal_or_yes_refuses_with_4_and_stops_nothing(emulator, world, capsys):
    code, _, err = run(capsys, *world["files"], "--stop")
    assert code == 4
    assert "error: stopping objects past their deadline: standard input is not a terminal" in err
    assert stops(emulator) == []


def test_stop_stops_the_session_then_its_gpu_and_nothing_else(emulator, world, client, capsys):
    code, out, err = run(capsys, *world["files"], "--stop", "--yes")
    assert code == 0, err
    assert stops(emulator) == [
        f"/v1/rl/training-sessions/{world['trial']}/stop",
        f"/v1/rl/model-resources/{world['gpu']}/stop",
    ]
    assert f"stopped model resource {world['gpu']}" in out and "its deadline, stop_after " in out
    for name in ("later", "prod", "lookalike"):
        assert client.get_model_resource(world[name]).status.short == "READY"
    assert out.splitlines()[-1] == "3 objects with a deadline in 1 stack, 2 past it and running. Stopped 2."


def test_an_object_a_live_create_holds_is_left_running(emulator, world, client, capsys):
    held = begun(
        MODEL_RESOURCE,
        emulator.base_url,
        {"base_model": MODEL},
        "organization/team/dev/gpu",
        ident=world["gpu"],
    )
    try:
        code, out, err = run(capsys, *world["files"], "--stop", "--yes")
    finally:
        held.release()
    assert code == 0, err
    assert stops(emulator) == [f"/v1/rl/training-sessions/{world['trial']}/stop"]
    assert client.get_model_resource(world["gpu"]).status.short == "READY"
    (gpu_line,) = [line for line in out.splitlines() if f"({world['gpu']})" in line and "--stop" in line]
    assert "--stop leaves it: a live create may hold it" in gpu_line


def test_a_rejected_key_is_a_failed_run_with_one_sentence_and_the_key_never_shown(emulator, world, capsys):
    emulator.control.add_fault(
        method="GET", path="model-resources/", status=401, times=None, message=f"bad key {emulator.api_key}"
    )
    code, out, err = run(capsys, *world["files"], "--api-key", emulator.api_key)
    assert code == 1, out + err
    assert stops(emulator) == []
    assert f"model resource gpu ({world['gpu']}), stop_after " in out
    assert (
        "--stop leaves it: asking the API for it failed: the API rejected the key (HTTP 401: bad key ***)"
        in out
    )
    assert "error: reaping objects past their deadline: the API could not be asked about some objects" in err
    assert emulator.api_key not in out + err


def test_stacks_that_declare_no_deadline_need_nothing_and_no_request(emulator, tmp_path, capsys):
    path = tmp_path / "free.json"
    path.write_text(
        json.dumps({"version": 3, "deployment": {"resources": [resource(RESOURCE, "mr-1", "gpu")]}})
    )
    emulator.control.clear_requests()
    code, out, err = run(capsys, "--state", str(path), "--stop", "--yes")
    assert code == 0, err
    assert (
        out.splitlines()[-1]
        == "None of the objects the stacks read hold declares a deadline (stop_after): nothing to do."
    )
    assert emulator.control.requests() == []
