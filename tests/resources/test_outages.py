"""API outages around a create: the provider outlasts them, with exactly one object and nothing orphaned.

The emulator's time-windowed faults (``duration``, ``armed_by``) take every ``/v1`` endpoint down for 12 s
from the instant a create is accepted; the provider must neither give up its wait nor make a second object.
"""

from __future__ import annotations

import time

import pytest

from pulumi_together_rl.messages import UserError

from .conftest import MODEL

OUTAGE = 12.0
RESOURCES = "/v1/rl/model-resources"
SESSIONS = "/v1/rl/training-sessions"


def _active(rig, kind):
    gone = ("STOPPING", "STOPPED", "ERROR")
    return [o for o in rig.control.state()[kind] if not o["status"].endswith(gone)]


def _outage_after(rig, create_path: str) -> str:
    return rig.control.add_fault(
        path="^/v1/", status=503, times=None, duration=OUTAGE, armed_by=f"^POST {create_path}$"
    )


def test_a_12_s_outage_from_the_moment_a_resource_create_is_accepted_is_outlasted(rig, capsys):
    _outage_after(rig, RESOURCES)
    started = time.monotonic()

    created = rig.create_resource(compute_config={"num_generator_replicas": 1})

    assert time.monotonic() - started >= OUTAGE  # it really waited through the outage
    assert created.outs["status"] == "READY"
    assert [o["id"] for o in _active(rig, "model_resources")] == [created.id]
    assert len(rig.posts(RESOURCES)) == 1 and rig.posts("/stop") == []
    faulted = [r for r in rig.control.requests() if r["fault"]]
    assert len(faulted) >= 2  # polls did fail during the outage
    assert "the API is failing (HTTP 503), still waiting" in capsys.readouterr().err


def test_a_12_s_outage_from_the_moment_a_session_create_is_accepted_is_outlasted(rig):
    resource = rig.create_resource()
    _outage_after(rig, SESSIONS)

    session = rig.create_session(resource.id, lora_config={"rank": 8})

    assert session.outs["status"] == "RUNNING"
    assert [o["id"] for o in _active(rig, "training_sessions")] == [session.id]
    assert len(rig.posts(SESSIONS)) == 1 and rig.posts("/stop") == []


def test_a_create_that_acts_then_answers_504_while_the_list_is_down_makes_one_object(rig):
    # The POST acts and its answer is lost; the reconciliation's list lookups fail for 12 s after that.
    rig.control.add_fault(method="POST", path=f"^{RESOURCES}$", status=504, act_then_fail=True)
    rig.control.add_fault(
        method="GET",
        path=f"^{RESOURCES}$",
        status=503,
        times=None,
        duration=OUTAGE,
        armed_by=f"^POST {RESOURCES}$",
    )

    created = rig.create_resource()

    assert created.outs["status"] == "READY"
    assert [o["id"] for o in _active(rig, "model_resources")] == [created.id]
    assert len(rig.posts(RESOURCES)) == 1, "the create was resent"
    assert rig.control.state()["model_resources"][0]["base_model"] == MODEL


def test_a_failed_create_keeps_trying_its_stop_through_an_outage(rig, monkeypatch):
    # The create times out in the capacity queue; the stop that cleans up meets a 503 outage of a few
    # seconds, and persists through it.
    rig.control.configure(timings={"resource_pending": 60.0})
    rig.control.add_fault(
        method="POST", path=r"/stop$", status=503, times=None, duration=5.0, armed_by=f"^POST {RESOURCES}$"
    )

    with pytest.raises(UserError) as caught:
        rig.create_resource(create_timeout=1)

    assert "It has been stopped" in str(caught.value), caught.value
    assert _active(rig, "model_resources") == []
    stops = rig.posts("/stop")
    assert len(stops) >= 2 and stops[-1]["status"] == 200


def test_a_delete_stop_outlasts_an_outage(rig):
    resource = rig.create_resource()
    rig.control.add_fault(method="POST", path=r"/stop$", status=503, times=None, duration=5.0)

    rig.resources.delete(resource.id, resource.outs)

    assert _active(rig, "model_resources") == []
    assert rig.posts("/stop")[-1]["status"] == 200
