"""The create journal through the providers: what an interrupted create made is taken over, never made twice.

An interrupted create is simulated the way it is left on disk: an entry written by a process that is gone
(a real pid of a process that exited). The real-signal tests through the CLI are in tests/e2e/test_cli_interrupts.py.
"""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from pulumi_together_rl import journal
from pulumi_together_rl.client.models import ModelResourceCreateRequest, TrainingSessionCreateRequest
from pulumi_together_rl.resources._errors import ProviderError

from .conftest import MODEL

RESOURCES = "/v1/rl/model-resources"
SESSIONS = "/v1/rl/training-sessions"


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def interrupted_entry(rig, kind: str, body: dict, ident: str | None) -> journal.Entry:
    entry = journal.begin(kind, rig.emulator.base_url, body)
    entry.pid = dead_pid()
    if ident:
        entry.record(ident)
    else:
        entry._write()
    return entry


def active(rig, key):
    gone = ("STOPPING", "STOPPED", "ERROR")
    return [o["id"] for o in rig.control.state()[key] if not o["status"].endswith(gone)]


def test_every_create_leaves_no_entry_once_the_engine_has_the_result(rig):
    created = rig.create_resource()
    rig.create_session(created.id, lora_config={"rank": 8})
    assert journal.entries() == []


def test_a_resource_an_interrupted_create_made_is_taken_over_not_made_again(rig, capsys):
    request = ModelResourceCreateRequest(base_model=MODEL)
    made = rig.client.create_model_resource(request)  # what the interrupted run's POST made
    interrupted_entry(rig, "model resource", request.to_wire(), made.id)
    rig.control.clear_requests()

    created = rig.create_resource()

    assert created.id == made.id
    assert rig.posts(RESOURCES) == []
    assert active(rig, "model_resources") == [made.id]
    assert "taking it over: an interrupted `pulumi up` created it" in capsys.readouterr().err
    assert journal.entries() == []


def test_a_create_killed_before_its_answer_is_found_by_matching_and_taken_over(rig, capsys):
    resource = rig.create_resource()
    request = TrainingSessionCreateRequest(model_resources_id=resource.id, display_name="exp")
    interrupted_entry(rig, "training session", request.to_wire(), None)  # no id: the answer never came
    # The interrupted process's POST (made over plain HTTP: this process's client never saw its answer).
    made = httpx.post(
        rig.emulator.base_url + SESSIONS,
        json=request.to_wire(),
        headers={"Authorization": f"Bearer {rig.emulator.api_key}"},
        timeout=10,
    ).json()
    rig.control.clear_requests()

    session = rig.create_session(resource.id, display_name="exp")

    assert session.id == made["id"]
    assert rig.posts(SESSIONS) == []
    assert "asked for it and never got the answer" in capsys.readouterr().err
    assert journal.entries() == []


def test_an_object_that_existed_before_the_interrupted_create_is_never_taken(rig):
    request = ModelResourceCreateRequest(base_model=MODEL)
    stranger = rig.client.create_model_resource(request)  # another stack's identical resource, older
    rig.control.advance(600)
    entry = interrupted_entry(rig, "model resource", request.to_wire(), None)
    entry.started_at = rig.control.now().isoformat()
    entry._write()

    created = rig.create_resource()

    assert created.id != stranger.id
    assert len(rig.posts(RESOURCES)) == 2  # the stranger's and ours


def test_an_interrupted_create_whose_object_is_gone_is_dropped_and_a_new_one_made(rig, capsys):
    request = ModelResourceCreateRequest(base_model=MODEL)
    made = rig.client.create_model_resource(request)
    rig.client.stop_model_resource(made.id)
    interrupted_entry(rig, "model resource", request.to_wire(), made.id)

    created = rig.create_resource()

    assert created.id != made.id
    assert "it is STOPP" in capsys.readouterr().err
    assert journal.entries() == []


def test_an_entry_of_a_live_process_is_left_alone(rig):
    request = ModelResourceCreateRequest(base_model=MODEL)
    made = rig.client.create_model_resource(request)
    live = journal.begin("model resource", rig.emulator.base_url, request.to_wire())
    live.pid = 1  # init: alive, and not us
    live.record(made.id)

    created = rig.create_resource()

    assert created.id != made.id
    assert [e.id for e in journal.entries()] == [made.id]


def test_a_failed_create_whose_stop_failed_keeps_its_entry_for_the_next_create(rig):
    rig.control.configure(timings={"resource_pending": 60.0})
    rig.control.add_fault(method="POST", path=r"/stop$", status=400, times=None)

    try:
        rig.create_resource(create_timeout=1)
    except Exception as exc:
        assert "Stopping it failed too" in str(exc)
    else:
        raise AssertionError("the create should have timed out")

    kept = journal.entries()
    assert len(kept) == 1 and kept[0].id == active(rig, "model_resources")[0]


def test_when_the_interrupted_object_cannot_be_looked_up_nothing_is_created_and_the_entry_stays(rig):
    request = ModelResourceCreateRequest(base_model=MODEL)
    made = rig.client.create_model_resource(request)
    interrupted_entry(rig, "model resource", request.to_wire(), made.id)
    rig.control.add_fault(method="GET", path=f"^{RESOURCES}/{made.id}$", status=503, times=None)
    rig.control.clear_requests()

    with pytest.raises(ProviderError) as caught:
        rig.create_resource()

    assert made.id in str(caught.value) and "looking for it failed" in str(caught.value)
    assert rig.posts(RESOURCES) == []  # never a second allocation on a guess
    assert [e.id for e in journal.entries()] == [made.id]
    rig.control.clear_faults()
    assert rig.create_resource().id == made.id  # the next run takes it over
