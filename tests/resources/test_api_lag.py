"""What the real API may do and the fault rules cannot express, through the emulator's lag settings:
a GET/stop that answers 404 for a young object, a list that lags a create, a stop that answers 200 and does
not take. The provider must neither drop, nor call gone, nor duplicate, nor wait out its timeout."""

from __future__ import annotations

import pytest
from harness.journals import entries, unfinished

from pulumi_together_rl.messages import UserError

from .conftest import LIST_LAG_HERE, MODEL

RESOURCES = "/v1/rl/model-resources"
SESSIONS = "/v1/rl/training-sessions"


def _status(rig, key, ident):
    return next(o for o in rig.control.state()[key] if o["id"] == ident)["status"]


def test_refresh_keeps_a_young_object_the_api_answers_404_for(rig, capsys):
    created = rig.create_resource()
    # Every object is "too young to be seen" for now, by lists (which refresh reads first) and by GET.
    rig.control.configure(read_lag=120.0, list_lag=120.0)

    kept = rig.resources.read(created.id, created.outs)

    assert kept.id == created.id and kept.outs["status"] == "READY"
    assert "keeping it in the state (read-after-write lag)" in capsys.readouterr().err


def test_refresh_drops_an_old_object_the_api_answers_404_for(rig):
    old = {"base_model": MODEL, "created_at": "2020-01-01T00:00:00Z", "status": "READY"}
    assert rig.resources.read("00000000-0000-0000-0000-000000000000", old).id == ""


def test_a_stop_answering_404_for_a_young_object_is_never_taken_for_gone(rig):
    created = rig.create_resource()
    rig.control.configure(read_lag=120.0)

    with pytest.raises(UserError) as caught:
        rig.resources.delete(created.id, created.outs)

    assert "may still exist" in str(caught.value)
    rig.control.configure(read_lag=0.0)
    assert _status(rig, "model_resources", created.id).endswith("READY")  # it was there all along
    rig.resources.delete(created.id, created.outs)  # and a later destroy stops it
    assert not _status(rig, "model_resources", created.id).endswith("READY")


def test_a_create_whose_answer_is_lost_while_the_list_lags_makes_one_session(rig):
    resource = rig.create_resource()
    rig.control.configure(list_lag=LIST_LAG_HERE / 2)
    rig.control.add_fault(method="POST", path=f"^{SESSIONS}$", status=504, act_then_fail=True)

    session = rig.create_session(resource.id, display_name="lagging")

    sessions = rig.control.state()["training_sessions"]
    assert [s["id"] for s in sessions] == [session.id], "the create was resent"
    assert len(rig.posts(SESSIONS)) == 1


def test_an_answered_500_after_acting_while_the_list_lags_makes_one_session(rig):
    """The API acted, answered its own 500, and lists the session only after a lag: the create looks until it
    shows, takes it (a session's one look-alike on its GPU is its own: the per-kind rule), and never resends."""
    resource = rig.create_resource()
    rig.control.configure(list_lag=LIST_LAG_HERE / 2)
    rig.control.add_fault(method="POST", path=f"^{SESSIONS}$", status=500, act_then_fail=True)

    session = rig.create_session(resource.id, display_name="lagging")

    [made] = rig.control.state()["training_sessions"]
    assert made["id"] == session.id
    assert len(rig.posts(SESSIONS)) == 1, "the create was resent"


def test_an_answered_500_after_acting_while_the_list_lags_names_the_model_resource(rig):
    """The same for a model resource: it looks until the list shows it, and names it (a colleague's identical
    request is as likely), never taken, never resent."""
    rig.control.configure(list_lag=LIST_LAG_HERE / 2)
    rig.control.add_fault(method="POST", path=f"^{RESOURCES}$", status=500, act_then_fail=True)

    with pytest.raises(UserError) as named:
        rig.create_resource()

    [made] = rig.control.state()["model_resources"]
    assert made["id"] in str(named.value) and "adopt_id" in str(named.value)
    assert len(rig.posts(RESOURCES)) == 1, "the create was resent"


def test_a_stop_that_answers_200_but_does_not_take_is_sent_again(rig, monkeypatch, capsys):
    from pulumi_together_rl import stopping

    monkeypatch.setattr(stopping, "RESTOP_AFTER", 0.3)
    created = rig.create_resource()
    rig.control.configure(stops_ignored=1)

    rig.resources.delete(created.id, {**created.outs, "delete_timeout": 30})

    assert not _status(rig, "model_resources", created.id).endswith("READY")
    assert len(rig.posts("/stop")) == 2
    assert "after the stop; stopping again" in capsys.readouterr().err


def test_the_emulator_lag_settings_are_validated(rig):
    for bad in ({"read_lag": -1}, {"list_lag": "x"}, {"stops_ignored": -2}):
        with pytest.raises(Exception) as caught:
            rig.control.configure(**bad)
        assert getattr(caught.value, "status", None) == 400


def test_a_failed_create_whose_stop_answers_200_but_does_not_take_stops_it_for_real(rig, capsys):
    # Found by the fault campaign (seed 3, cycle 102): the cleanup stop was taken for done while it did nothing.
    resource = rig.create_resource()
    rig.control.configure(stops_ignored=1, timings={"session_creating": 2.5})

    with pytest.raises(UserError) as caught:
        rig.create_session(resource.id, lora_config={"rank": 8}, create_timeout=1.0)

    assert "It has been stopped" in str(caught.value)
    [session] = rig.control.state()["training_sessions"]
    assert session["status"].endswith(("STOPPING", "STOPPED"))
    assert len(rig.posts("/stop")) == 2
    assert unfinished() == []


def test_a_failed_create_whose_stop_never_takes_says_so_and_keeps_its_journal_entry(rig):
    rig.control.configure(stops_ignored=100, timings={"resource_pending": 60.0})

    with pytest.raises(UserError) as caught:
        rig.create_resource(create_timeout=1)

    message = str(caught.value)
    assert "did not take" in message and "It has been stopped" not in message
    [resource] = rig.control.state()["model_resources"]
    assert resource["status"].endswith("PENDING")  # still on its way to billing: the user is told, and ...
    assert [e.entry.id for e in entries()] == [resource["id"]]  # ... the next create takes it over
    rig.control.configure(stops_ignored=0)
    rig.resources.delete(resource["id"], {"created_at": "2020-01-01T00:00:00Z"})
