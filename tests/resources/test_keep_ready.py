"""``keep_ready_until``: a model resource held READY past its ``inactive_timeout``, through extend-expiry at
create, update and refresh, and an idle stop after it, handled as drift. Against the emulator, whose clock the
tests move on (``advance``) instead of waiting."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest

from pulumi_together_rl.messages import UserError
from pulumi_together_rl.resources import process

from .conftest import OWNER


def _at(hours: float) -> str:
    moment = datetime.now(timezone.utc) + timedelta(hours=hours)
    return moment.replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _extends(rig) -> list[dict]:
    return [r for r in rig.control.requests() if r["path"].endswith("/extend-expiry")]


def _refresh(rig, ident: str, outs: dict):
    """A read as a new `pulumi refresh` makes it: no list cached from the one before."""
    process.clear_lookups()
    return rig.resources.read(ident, outs)


def test_a_keep_holds_the_resource_ready_past_its_inactive_timeout(rig, capsys):
    until = _at(2)
    created = rig.create_resource(inactive_timeout=300, keep_ready_until=until)

    (extend,) = _extends(rig)
    assert 7100 <= extend["body"]["seconds"] <= 7200
    assert _time(created.outs["expires_at"]) >= _time(until)
    assert created.outs["keep_ready_until"] == until  # echoed as declared
    assert f"kept READY until {created.outs['expires_at']}" in capsys.readouterr().err

    rig.control.advance(3600)  # an hour without activity: far past inactive_timeout
    rig.control.clear_requests()
    found = _refresh(rig, created.id, created.outs)

    assert found.id == created.id and found.outs["status"] == "READY"
    assert _extends(rig) == []  # its expiry already keeps the promise: a refresh sends nothing
    assert rig.resources.diff(created.id, found.outs, found.inputs).changes is False

    rig.control.advance(2 * 3600)  # past keep_ready_until: it idles out as usual
    gone = _refresh(rig, created.id, found.outs)

    assert gone.id == ""
    line = capsys.readouterr().err
    # It stopped when its keep ended, two hours idle: not "after 300 s without activity".
    assert f"stopped itself for inactivity when its keep ended: keep_ready_until, {until}, had passed" in line
    assert "300 s" not in line
    assert "the next `pulumi up` creates a new one" in line


def test_an_idle_stop_without_a_keep_says_inactive_timeout(rig, capsys):
    created = rig.create_resource(inactive_timeout=300)
    rig.control.advance(301)
    capsys.readouterr()

    assert _refresh(rig, created.id, created.outs).id == ""
    line = capsys.readouterr().err
    assert "stopped itself after 300 s without session activity (inactive_timeout)" in line


def test_a_keep_that_no_daily_refresh_carried_says_it_stopped_before_the_keep(rig, capsys):
    until = _at(30)
    created = rig.create_resource(keep_ready_until=until)  # extended a day ahead, the most one call reaches
    rig.control.advance(25 * 3600)  # no refresh in between
    capsys.readouterr()

    assert _refresh(rig, created.id, created.outs).id == ""
    line = capsys.readouterr().err
    assert f"before keep_ready_until, {until}" in line and "refresh` at least daily" in line


def test_a_keep_is_counted_on_the_apis_clock_and_a_skewed_clock_is_said_once(rig, capsys):
    """The API's clock runs 20 minutes ahead of this machine's: the keep ends at keep_ready_until on the API's
    clock, not 20 minutes later (seconds counted from this machine's clock would over-extend)."""
    rig.control.advance(1200)
    until = _at(2)
    created = rig.create_resource(inactive_timeout=300, keep_ready_until=until)

    (extend,) = _extends(rig)
    assert 7200 - 1200 - 5 <= extend["body"]["seconds"] <= 7200 - 1200 + 2
    assert _time(until) <= _time(created.outs["expires_at"]) <= _time(until) + timedelta(seconds=3)

    later = {**created.outs, "keep_ready_until": _at(3)}
    updated = rig.resources.update(created.id, created.outs, later)
    assert _time(updated.outs["expires_at"]) <= _time(later["keep_ready_until"]) + timedelta(seconds=3)
    err = capsys.readouterr().err
    assert err.count("warning: this machine's clock is ") == 1
    assert re.search(r"this machine's clock is (19 min 5\d s|20 min) behind the Together API's", err), err


def test_a_keep_more_than_30_days_ahead_fails_at_check_and_more_than_a_week_warns(rig, capsys):
    declared = {"base_model": "Qwen/Qwen3.5-4B", "owner": OWNER + "gpu"}

    (failure,) = rig.resources.check({}, {**declared, "keep_ready_until": "9999-12-31T23:59:59Z"}).failures
    assert failure.property == "keep_ready_until"
    assert failure.reason.startswith(
        "keep_ready_until is more than 30 days ahead, the furthest a keep may reach"
    )
    assert "at most 30 days ahead" in failure.reason
    assert rig.resources.check({}, {**declared, "keep_ready_until": _at(2 * 24)}).failures == []
    assert "warning" not in capsys.readouterr().err
    assert rig.resources.check({}, {**declared, "keep_ready_until": _at(29 * 24)}).failures == []
    assert "keep_ready_until is 28 days ahead" in capsys.readouterr().err

    ten_days = {**declared, "keep_ready_until": _at(10 * 24)}
    checked = rig.resources.check({}, ten_days)
    rig.resources.check({}, ten_days)  # the engine checks a replacement twice: said once
    assert checked.failures == []
    err = capsys.readouterr().err
    assert err.count("keep_ready_until is 9 days ahead: the GPU stays READY, billed every hour") == 1
    rig.resources.check(checked.inputs, ten_days)  # unchanged: nothing to say
    assert "warning" not in capsys.readouterr().err


def test_a_deployed_keep_beyond_the_bound_is_not_extended_at_refresh(rig, capsys):
    """A state written before the bound holds keep_ready_until 9999-12-31: a refresh no longer extends for it."""
    created = rig.create_resource()
    rig.control.clear_requests()

    found = _refresh(rig, created.id, {**created.outs, "keep_ready_until": "9999-12-31T23:59:59Z"})

    assert found.outs["status"] == "READY" and _extends(rig) == []
    assert (
        "keep_ready_until is more than 30 days ahead, further than a keep may reach"
        in capsys.readouterr().err
    )


def test_a_keep_beyond_a_day_is_extended_again_at_refresh(rig, capsys):
    until = _at(30)
    created = rig.create_resource(keep_ready_until=until)

    (first,) = _extends(rig)
    assert first["body"]["seconds"] == 86400  # the most one call may ask for
    assert "extends it again" in capsys.readouterr().err

    rig.control.advance(20 * 3600)
    rig.control.clear_requests()
    found = _refresh(rig, created.id, created.outs)

    (again,) = _extends(rig)
    assert 10 * 3600 - 5 <= again["body"]["seconds"] <= 10 * 3600 + 2  # the 10 h left on the API's clock
    assert _time(found.outs["expires_at"]) >= _time(until)
    assert found.outs["status"] == "READY"


def test_a_keep_in_the_past_sends_nothing(rig):
    rig.create_resource(keep_ready_until="2020-01-01T00:00:00Z")
    assert _extends(rig) == []


def test_changing_the_keep_is_an_update_that_extends_never_a_replace(rig):
    created = rig.create_resource(inactive_timeout=300)
    assert _extends(rig) == []
    news = {**created.outs, "keep_ready_until": _at(5)}
    news = rig.resources.check(created.outs, news).inputs

    diff = rig.resources.diff(created.id, created.outs, news)
    updated = rig.resources.update(created.id, created.outs, news)

    assert diff.changes is True and diff.replaces == []
    (extend,) = _extends(rig)
    assert extend["body"]["seconds"] >= 5 * 3600 - 60
    assert _time(updated.outs["expires_at"]) >= _time(news["keep_ready_until"])

    # Moved back: the API never moves an expiry earlier, so there is nothing to send.
    rig.control.clear_requests()
    earlier = {**news, "keep_ready_until": _at(1)}
    again = rig.resources.update(created.id, updated.outs, earlier)
    assert _extends(rig) == []
    assert again.outs["expires_at"] == updated.outs["expires_at"]


def test_a_failed_extend_at_refresh_is_a_line_not_a_failed_refresh(rig, capsys):
    created = rig.create_resource()
    outs = {**created.outs, "keep_ready_until": _at(4)}  # as a refresh after `up` changed it would find it
    rig.control.add_fault(method="POST", path="extend-expiry$", status=403, times=None, message="no")

    found = _refresh(rig, created.id, outs)

    assert found.id == created.id and found.outs["status"] == "READY"
    err = capsys.readouterr().err
    assert f"model resource {created.id}: keeping it as keep_ready_until declares failed" in err


def test_a_failed_extend_at_update_fails_the_update_naming_the_keep(rig):
    created = rig.create_resource()
    rig.control.add_fault(method="POST", path="extend-expiry$", status=403, times=None, message="no")
    news = {**created.outs, "keep_ready_until": _at(3)}

    with pytest.raises(UserError) as caught:
        rig.resources.update(created.id, created.outs, news)

    assert str(caught.value).startswith(
        f"updating model resource ({created.id}): keeping it as keep_ready_until"
    )


def test_a_stop_before_the_expiry_is_not_called_an_idle_stop(rig, capsys):
    created = rig.create_resource()
    rig.client.stop_model_resource(created.id)
    capsys.readouterr()

    assert _refresh(rig, created.id, created.outs).id == ""
    err = capsys.readouterr().err
    assert "dropping it from the state" in err and "stopped itself" not in err


@pytest.mark.parametrize(
    "value", ["tomorrow", "2026-12-04T18:00:00", "2026-13-04T18:00:00Z", 1765000000, "2026-12-04T18:00:00Z\n"]
)
def test_a_keep_that_is_not_an_rfc3339_time_fails_at_check_naming_the_field(rig, value):
    checked = rig.resources.check({}, {"base_model": "Qwen/Qwen3.5-4B", "owner": OWNER + "gpu",
                                       "keep_ready_until": value})  # fmt: skip
    assert [f.property for f in checked.failures] == ["keep_ready_until"]
    assert "RFC 3339" in checked.failures[0].reason


def test_a_session_that_expired_with_its_idle_resource_is_said_to_have(rig, capsys):
    resource = rig.create_resource(inactive_timeout=300)
    session = rig.create_session(resource.id)
    rig.control.advance(301 + 300)  # its create was activity: the resource idles out after that
    capsys.readouterr()

    process.clear_lookups()
    assert rig.sessions.read(session.id, session.outs).id == ""
    err = capsys.readouterr().err
    assert "is EXPIRED (it ended when its model resource stopped itself for inactivity)" in err
