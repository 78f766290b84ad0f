"""``stop_after``, a declared deadline, through the providers and the emulator: a create still waiting at its
deadline stops what it made; past it, an ``up`` stops an object still running (an update the diff shows), a
refresh keeps a stopped one in the state (so nothing re-creates it), and moving a passed deadline replaces it;
moving one ahead is an update that calls nothing. A model resource's deadline does not force the sessions on it.

The emulator's clock moves with ``advance`` (the create, refresh and ``reap`` judge on the API's clock); a diff
judges on this machine's, moved here by patching :func:`pulumi_together_rl.resources.deadline.now`."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest

from pulumi_together_rl.messages import UserError
from pulumi_together_rl.resources import deadline, process

from .conftest import MODEL, OWNER


def _at(seconds: float) -> str:
    moment = datetime.now(timezone.utc) + timedelta(seconds=seconds)
    return moment.replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _refresh(rig, provider, ident: str, outs: dict):
    process.clear_lookups()  # a new `pulumi refresh`: no list cached from the one before
    return provider.read(ident, outs)


def _machine_clock_at(monkeypatch, rig) -> None:
    """This machine's clock where the emulator's is (the diff and update read it)."""
    monkeypatch.setattr(deadline, "now", lambda: rig.control.now())


def test_a_create_still_waiting_at_its_deadline_stops_what_it_made_and_keeps_it_stopped(rig, capsys):
    rig.control.configure(timings={"resource_pending": 3600.0})  # a capacity queue longer than the deadline
    until = _at(10)  # enough for the check and the POST under a loaded machine; the wait runs out the rest

    made = rig.resources.create(
        rig.resources.check({}, {"base_model": MODEL, "owner": OWNER + "gpu", "stop_after": until}).inputs
    )

    assert made.outs["status"] in ("STOPPING", "STOPPED")
    assert made.outs["stop_reason"] == "deadline" and made.outs["stop_at"] == until
    live = rig.client.get_model_resource(made.id)
    assert live.status.short in ("STOPPING", "STOPPED")  # what it made no longer bills
    err = capsys.readouterr().err
    assert f"not READY by its deadline, stop_after {until}" in err and "stopped at its deadline" in err
    # A refresh keeps it, stopped: the next `up` does not re-create it.
    found = _refresh(rig, rig.resources, made.id, made.outs)
    assert found.id == made.id and found.outs["stop_reason"] == "deadline"
    assert rig.resources.diff(made.id, found.outs, found.inputs).changes is False


def test_a_create_whose_deadline_has_passed_is_refused_at_check_and_posts_nothing(rig):
    past = _at(-60)
    declared = {"base_model": MODEL, "owner": OWNER + "gpu", "stop_after": past}

    (failure,) = rig.resources.check({}, declared).failures
    assert failure.property == "stop_after" and failure.reason.startswith("stop_after has passed")
    rig.control.clear_requests()
    with pytest.raises(UserError) as raised:
        rig.resources.create(declared)  # an `up` that reached the create after the moment passed
    assert str(raised.value).startswith(f"creating model resource ({MODEL}): its deadline, stop_after {past}")
    assert not [r for r in rig.control.requests() if r["method"] == "POST"]


def test_past_its_deadline_an_up_stops_it_a_refresh_keeps_it_and_moving_the_deadline_replaces_it(
    rig, monkeypatch, capsys
):
    _machine_clock_at(monkeypatch, rig)
    made = rig.create_resource(stop_after="2h", inactive_timeout=86400)
    assert _time(made.outs["stop_at"]) == _time(made.outs["created_at"]) + timedelta(hours=2)
    assert rig.resources.diff(made.id, made.outs, made.outs).changes is False

    rig.control.advance(3 * 3600)
    capsys.readouterr()
    found = _refresh(
        rig, rig.resources, made.id, made.outs
    )  # a refresh never stops (a preview writes nothing)
    assert found.outs["status"] == "READY" and "stop_reason" not in found.outs
    assert "READY past its deadline, stop_after 2h" in capsys.readouterr().err
    assert rig.client.get_model_resource(made.id).status.short == "READY"

    planned = rig.resources.diff(made.id, found.outs, found.inputs)
    assert planned.changes is True and planned.replaces == []  # an update: the preview shows it
    updated = rig.resources.update(made.id, found.outs, found.inputs)
    assert updated.outs["stop_reason"] == "deadline" and updated.outs["status"] in ("STOPPING", "STOPPED")
    assert rig.client.get_model_resource(made.id).status.short in ("STOPPING", "STOPPED")
    assert rig.resources.diff(made.id, updated.outs, found.inputs).changes is False

    again = _refresh(rig, rig.resources, made.id, updated.outs)
    assert again.id == made.id and again.outs["stop_reason"] == "deadline"  # not dropped: no re-create
    assert "keeping it in the state, stopped" in capsys.readouterr().err

    moved = rig.resources.diff(made.id, again.outs, {**again.inputs, "stop_after": "6h"})
    assert moved.replaces == ["stop_after"]  # a new object, with the new deadline


def test_a_deadline_that_moves_while_ahead_is_an_update_that_calls_nothing(rig, monkeypatch):
    _machine_clock_at(monkeypatch, rig)
    made = rig.create_resource(stop_after="2h")
    news = {**made.outs, "stop_after": "5h"}

    planned = rig.resources.diff(made.id, made.outs, news)
    assert planned.changes is True and planned.replaces == []
    rig.control.clear_requests()
    updated = rig.resources.update(made.id, made.outs, news)
    assert rig.control.requests() == []
    assert _time(updated.outs["stop_at"]) == _time(made.outs["created_at"]) + timedelta(hours=5)
    removed = rig.resources.update(
        made.id, updated.outs, {k: v for k, v in news.items() if k != "stop_after"}
    )
    assert "stop_at" not in removed.outs and "stop_after" not in removed.outs


def test_a_sessions_deadline_stops_the_session_and_not_its_model_resource(rig, monkeypatch):
    _machine_clock_at(monkeypatch, rig)
    resource = rig.create_resource(inactive_timeout=86400)
    session = rig.create_session(resource.id, stop_after="1h")
    rig.control.advance(2 * 3600)

    outs = {**session.outs, "status": "RUNNING"}
    assert rig.sessions.diff(session.id, outs, outs).changes is True
    updated = rig.sessions.update(session.id, outs, outs)

    assert updated.outs["stop_reason"] == "deadline"
    assert rig.client.get_training_session(session.id).status.short in ("STOPPING", "STOPPED")
    assert rig.client.get_model_resource(resource.id).status.short == "READY"


def test_a_model_resources_deadline_does_not_force_the_sessions_on_it(rig, monkeypatch, capsys):
    _machine_clock_at(monkeypatch, rig)
    resource = rig.create_resource(stop_after="1h", inactive_timeout=86400)
    session = rig.create_session(resource.id)
    rig.control.advance(2 * 3600)
    capsys.readouterr()

    updated = rig.resources.update(resource.id, resource.outs, resource.outs)

    assert "stop_reason" not in updated.outs and updated.outs["status"] == "READY"
    err = capsys.readouterr().err
    assert re.search(r"warning: stopping model resource \(\S+\) at its deadline: .*" + session.id, err), err
    assert "the next `pulumi up` (or `reap --stop`) stops it" in err
    assert rig.client.get_training_session(session.id).status.short == "RUNNING"
    assert rig.resources.diff(resource.id, updated.outs, updated.outs).changes is True  # still due

    forced = {**resource.outs, "force_stop": True}
    stopped = rig.resources.update(resource.id, forced, forced)  # force_stop: the API stops its sessions too
    assert stopped.outs["stop_reason"] == "deadline"
    assert rig.client.get_training_session(session.id).status.short in ("STOPPING", "STOPPED")


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("30s", "at least 1 minute"),
        ("31d", "at most 30 days"),
        ("8 hours", "must be a duration"),
        ("2026-12-24T18:00:00", "must be a duration"),  # a time without its zone
        (8, "input should be a valid string"),
    ],
)
def test_a_malformed_deadline_fails_at_check_naming_the_field(rig, value, reason):
    declared = {"base_model": MODEL, "owner": OWNER + "gpu", "stop_after": value}
    (failure,) = rig.resources.check({}, declared).failures
    assert failure.property == "stop_after" and reason in failure.reason.lower()
    assert "1d12h" in failure.reason  # what to write instead


def test_check_bounds_a_time_deadline_and_a_keep_past_it_and_prints_the_most_it_can_cost(rig, capsys):
    declared = {"base_model": MODEL, "owner": OWNER + "gpu"}
    (far,) = rig.resources.check({}, {**declared, "stop_after": _at(31 * 86400)}).failures
    assert far.property == "stop_after" and "more than 30 days ahead" in far.reason
    (keep,) = rig.resources.check(
        {}, {**declared, "stop_after": "2h", "keep_ready_until": _at(3 * 3600)}
    ).failures
    assert keep.property == "keep_ready_until" and "reaches past the deadline, stop_after 2h" in keep.reason

    checked = rig.resources.check({}, {**declared, "stop_after": "8h"})
    assert checked.failures == []
    price = checked.inputs["price_per_hour"]
    err = capsys.readouterr().err
    assert (
        f"stop_after 8h, 8.0 h from its creation): at most 8.0 h x {price:.2f} USD/h = {8 * price:.2f} USD"
        in err
    )
    # Unchanged, a time that has passed is not judged again: the diff and reap act on it.
    past = {**declared, "stop_after": _at(-60)}
    assert rig.resources.check(past, past).failures == []
