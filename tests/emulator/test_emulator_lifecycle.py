"""Lifecycle of model resources and training sessions, driven by the emulator clock."""

from __future__ import annotations

from datetime import timedelta

import pytest
from emulator_helpers import (
    R_CREATING,
    R_ERROR,
    R_PENDING,
    R_READY,
    R_STOPPED,
    R_STOPPING,
    RESOURCES,
    S_CREATING,
    S_ERROR,
    S_EXPIRED,
    S_RUNNING,
    S_STOPPED,
    S_STOPPING,
    SESSIONS,
    ts,
)
from together.types.post_training import ModelResources, Session

from pulumi_together_rl.emulator.control import EmulatorControlError
from pulumi_together_rl.emulator.tables import ERROR_CODES


def test_resource_moves_pending_creating_ready_as_the_clock_advances(emulator, api):
    emulator.control.configure(timings={"resource_pending": 10, "resource_creating": 20})
    created = api.resource()
    assert created["status"] == R_PENDING
    assert created["status_details"] == {"queue_position": 1}
    assert "expires_at" not in created
    rid = created["id"]

    emulator.control.advance(9)
    assert api.get_resource(rid)["status"] == R_PENDING
    emulator.control.advance(2)
    creating = api.get_resource(rid)
    assert creating["status"] == R_CREATING
    assert creating["status_details"] == {}
    # The transition is stamped with the instant it was due, not the instant it was observed.
    assert ts(creating["updated_at"]) == ts(created["created_at"]) + timedelta(seconds=10)

    emulator.control.advance(20)
    ready = api.get_resource(rid)
    assert ready["status"] == R_READY
    assert ts(ready["updated_at"]) == ts(created["created_at"]) + timedelta(seconds=30)
    assert ts(ready["expires_at"]) == ts(ready["updated_at"]) + timedelta(seconds=3600)
    assert ready["inactive_timeout"] == 3600


def test_zero_timings_show_the_next_state_on_the_next_request(api):
    created = api.resource()
    assert created["status"] == R_PENDING  # create always answers PENDING
    assert api.get_resource(created["id"])["status"] == R_READY


def test_queue_position_counts_older_pending_resources(emulator, api):
    emulator.control.configure(timings={"resource_pending": 1000})
    first, second, third = (api.resource() for _ in range(3))
    positions = [
        api.get_resource(r["id"])["status_details"]["queue_position"] for r in (first, second, third)
    ]
    assert positions == [1, 2, 3]

    api.ok("POST", f"{RESOURCES}/{first['id']}/stop")
    assert api.get_resource(third["id"])["status_details"]["queue_position"] == 2

    emulator.control.configure(queue_position=7)
    assert api.get_resource(second["id"])["status_details"]["queue_position"] == 7


def test_changing_a_timing_releases_objects_already_waiting(emulator, api):
    emulator.control.configure(timings={"resource_pending": 10_000})
    rid = api.resource()["id"]
    assert api.get_resource(rid)["status"] == R_PENDING
    emulator.control.configure(timings={"resource_pending": 0})
    assert api.get_resource(rid)["status"] == R_READY


def test_session_moves_creating_running_stopping_stopped(emulator, api):
    emulator.control.configure(timings={"session_creating": 5, "session_stopping": 3})
    rid = api.ready_resource()["id"]
    session = api.session(rid)
    assert session["status"] == S_CREATING
    assert session["base_model"] == "Qwen/Qwen3.5-4B"
    emulator.control.advance(6)
    assert api.get_session(session["id"])["status"] == S_RUNNING

    stopping = api.ok("POST", f"{SESSIONS}/{session['id']}/stop")
    assert stopping["status"] == S_STOPPING
    emulator.control.advance(2)
    assert api.get_session(session["id"])["status"] == S_STOPPING
    emulator.control.advance(2)
    assert api.get_session(session["id"])["status"] == S_STOPPED
    # The resource keeps running: stopping a session only detaches it.
    assert api.get_resource(rid)["status"] == R_READY


def test_stop_of_a_pending_resource_goes_stopping_then_stopped(emulator, api):
    emulator.control.configure(timings={"resource_pending": 100, "resource_stopping": 4})
    rid = api.resource()["id"]
    stopping = api.ok("POST", f"{RESOURCES}/{rid}/stop")
    assert stopping["status"] == R_STOPPING
    assert stopping["status_details"] == {}
    emulator.control.advance(5)
    assert api.get_resource(rid)["status"] == R_STOPPED


def test_stopping_something_already_stopped_is_harmless(api):
    rid = api.ready_resource()["id"]
    sid = api.session(rid)["id"]
    api.ok("POST", f"{SESSIONS}/{sid}/stop")
    assert api.get_session(sid)["status"] == S_STOPPED
    again = api.ok("POST", f"{SESSIONS}/{sid}/stop")
    assert again["status"] == S_STOPPED

    api.ok("POST", f"{RESOURCES}/{rid}/stop")
    stopped = api.get_resource(rid)
    assert stopped["status"] == R_STOPPED
    assert api.ok("POST", f"{RESOURCES}/{rid}/stop") == stopped
    assert api.ok("POST", f"{RESOURCES}/{rid}/stop", params={"force": "true"}) == stopped


def test_fail_next_lands_the_next_resource_in_error_with_the_code(emulator, api):
    code = "MODEL_RESOURCES_ERROR_CODE_PROVISIONING_FAILED"
    emulator.control.fail_next("model_resource", code, message="no pods for you")
    rid = api.resource()["id"]
    failed = api.get_resource(rid)
    assert failed["status"] == R_ERROR
    assert failed["error"]["code"] == code
    assert failed["error"]["message"] == "no pods for you"
    assert ts(failed["error"]["occurred_at"]) <= ts(failed["updated_at"])
    # The failure was consumed: the next resource provisions normally.
    assert api.ready_resource()["status"] == R_READY


def test_fail_next_without_message_uses_the_codes_default_text(emulator, api):
    emulator.control.fail_next("model_resource", "MODEL_RESOURCES_ERROR_CODE_CAPACITY_WAIT_TIMEOUT")
    failed = api.get_resource(api.resource()["id"])
    assert failed["error"]["code"] == "MODEL_RESOURCES_ERROR_CODE_CAPACITY_WAIT_TIMEOUT"
    assert "capacity" in failed["error"]["message"].lower()


def test_fail_next_by_id_fails_that_resource_only(emulator, api):
    emulator.control.configure(timings={"resource_pending": 10})
    first, second = api.resource(), api.resource()
    emulator.control.fail_next(
        "model_resource", "MODEL_RESOURCES_ERROR_CODE_RESOURCE_UNAVAILABLE", id=second["id"]
    )
    emulator.control.advance(11)
    assert api.get_resource(first["id"])["status"] == R_READY
    assert api.get_resource(second["id"])["status"] == R_ERROR


def test_fail_next_on_a_ready_resource_fails_it_and_its_sessions_at_once(emulator, api):
    rid = api.ready_resource()["id"]
    sid = api.session(rid)["id"]
    assert api.get_session(sid)["status"] == S_RUNNING
    emulator.control.fail_next("model_resource", "MODEL_RESOURCES_ERROR_CODE_RESOURCE_UNAVAILABLE", id=rid)
    assert api.get_resource(rid)["status"] == R_ERROR
    session = api.get_session(sid)
    assert session["status"] == S_ERROR
    assert session["error"]["code"] == "TRAINING_SESSION_ERROR_CODE_RESOURCE_UNAVAILABLE"


def test_fail_next_session_lands_in_error_instead_of_running(emulator, api):
    rid = api.ready_resource()["id"]
    emulator.control.fail_next("training_session", "TRAINING_SESSION_ERROR_CODE_RESOURCE_AT_CAPACITY")
    sid = api.session(rid)["id"]
    session = api.get_session(sid)
    assert session["status"] == S_ERROR
    assert session["error"]["code"] == "TRAINING_SESSION_ERROR_CODE_RESOURCE_AT_CAPACITY"
    assert api.get_resource(rid)["status"] == R_READY


def test_fail_next_rejects_unknown_ids_kinds_and_finished_objects(emulator, api):
    code = "MODEL_RESOURCES_ERROR_CODE_PROVISIONING_FAILED"
    with pytest.raises(EmulatorControlError) as unknown:
        emulator.control.fail_next("model_resource", code, id="nope")
    assert unknown.value.status == 404
    with pytest.raises(EmulatorControlError) as bad_kind:
        emulator.control.fail_next("gpu", code)
    assert bad_kind.value.status == 400
    assert bad_kind.value.param == "kind"
    rid = api.ready_resource()["id"]
    api.ok("POST", f"{RESOURCES}/{rid}/stop")
    assert api.get_resource(rid)["status"] == R_STOPPED
    with pytest.raises(EmulatorControlError) as finished:
        emulator.control.fail_next("model_resource", code, id=rid)
    assert finished.value.status == 409


@pytest.mark.parametrize(
    ("kind", "code"),
    [
        ("model_resource", "TRAINING_SESSION_ERROR_CODE_TIMED_OUT"),  # the other kind's code
        ("training_session", "MODEL_RESOURCES_ERROR_CODE_PROVISIONING_FAILED"),
        ("model_resource", "MODEL_RESOURCES_ERROR_CODE_UNSPECIFIED"),  # not in the SDK's enum
        ("model_resource", "model_resources_error_code_provisioning_failed"),
        ("training_session", "X"),
        ("training_session", ""),
    ],
)
def test_fail_next_refuses_a_code_outside_that_kinds_enum(emulator, api, kind, code):
    rid = api.ready_resource()["id"]
    target = rid if kind == "model_resource" else api.session(rid)["id"]
    with pytest.raises(EmulatorControlError) as err:
        emulator.control.fail_next(kind, code, id=target)
    assert err.value.status == 400
    assert err.value.param == "code"
    with pytest.raises(EmulatorControlError) as untargeted:
        emulator.control.fail_next(kind, code)
    assert untargeted.value.param == "code"
    # Nothing was armed or applied: the objects carry on untouched.
    assert api.get_resource(rid)["status"] == R_READY
    assert "error" not in api.get_resource(rid)
    assert api.get_session(api.session(rid)["id"])["status"] == S_RUNNING


@pytest.mark.parametrize(
    ("kind", "code"),
    [("model_resource", c) for c in ERROR_CODES["model_resource"]]
    + [("training_session", c) for c in ERROR_CODES["training_session"]],
)
def test_every_code_fail_next_accepts_is_readable_by_the_sdk(emulator, api, kind, code):
    rid = api.ready_resource()["id"]
    sid = api.session(rid)["id"]
    emulator.control.fail_next(kind, code, id=rid if kind == "model_resource" else sid)
    resource = ModelResources.model_validate(api.get_resource(rid))
    session = Session.model_validate(api.get_session(sid))
    failed = resource if kind == "model_resource" else session
    assert failed.error is not None
    assert failed.error.code == code
    assert failed.error.message


def test_ready_resource_past_expires_at_stops_and_its_sessions_expire(emulator, api):
    emulator.control.configure(timings={"resource_stopping": 50})
    ready = api.ready_resource(inactive_timeout=300)
    sid = api.session(ready["id"])["id"]
    expires_at = ts(api.get_resource(ready["id"])["expires_at"])

    emulator.control.advance(290)
    assert api.get_resource(ready["id"])["status"] == R_READY
    emulator.control.advance(20)
    expired = api.get_resource(ready["id"])
    assert expired["status"] == R_STOPPING
    assert "expires_at" not in expired
    assert ts(expired["updated_at"]) == expires_at
    session = api.get_session(sid)
    assert session["status"] == S_EXPIRED
    assert ts(session["updated_at"]) == expires_at

    emulator.control.advance(50)
    assert api.get_resource(ready["id"])["status"] == R_STOPPED


def test_session_create_pushes_expiry_out_but_never_earlier(emulator, api):
    rid = api.ready_resource(inactive_timeout=600)["id"]
    first_expiry = ts(api.get_resource(rid)["expires_at"])
    emulator.control.advance(300)
    api.session(rid)
    pushed = ts(api.get_resource(rid)["expires_at"])
    assert pushed >= first_expiry + timedelta(seconds=299)

    api.ok("POST", f"{RESOURCES}/{rid}/extend-expiry", json={"seconds": 7200})
    extended = ts(api.get_resource(rid)["expires_at"])
    api.session(rid)  # activity only moves expires_at later, never earlier
    assert ts(api.get_resource(rid)["expires_at"]) == extended


def test_extend_expiry_sets_now_plus_seconds_and_never_moves_earlier(emulator, api):
    rid = api.ready_resource()["id"]
    before = ts(api.get_resource(rid)["expires_at"])
    extended = api.ok("POST", f"{RESOURCES}/{rid}/extend-expiry", json={"seconds": 7200})
    now = emulator.control.now()
    assert ts(extended["expires_at"]) > before
    assert abs((ts(extended["expires_at"]) - now).total_seconds() - 7200) < 5
    shorter = api.ok("POST", f"{RESOURCES}/{rid}/extend-expiry", json={"seconds": 60})
    assert shorter["expires_at"] == extended["expires_at"]


@pytest.mark.parametrize("seconds", [59, 86401, 0, -5])
def test_extend_expiry_outside_60_to_86400_is_a_400(api, seconds):
    rid = api.ready_resource()["id"]
    err = api.error("POST", f"{RESOURCES}/{rid}/extend-expiry", 400, json={"seconds": seconds})
    assert err["param"] == "seconds"
    assert err["type"] == "invalid_request_error"


def test_extend_expiry_of_a_resource_that_is_not_ready_is_a_conflict(emulator, api):
    emulator.control.configure(timings={"resource_pending": 100})
    rid = api.resource()["id"]
    err = api.error("POST", f"{RESOURCES}/{rid}/extend-expiry", 409, json={"seconds": 600})
    assert err["type"] == "conflict"
    assert err["code"] == "resource_not_ready"


def test_extend_expiry_keeps_a_resource_alive_past_its_inactive_timeout(emulator, api):
    rid = api.ready_resource(inactive_timeout=300)["id"]
    api.ok("POST", f"{RESOURCES}/{rid}/extend-expiry", json={"seconds": 3600})
    emulator.control.advance(1800)
    assert api.get_resource(rid)["status"] == R_READY
    emulator.control.advance(1810)
    assert api.get_resource(rid)["status"] in (R_STOPPING, R_STOPPED)


def test_clock_advance_rejects_negative_seconds(emulator):
    with pytest.raises(EmulatorControlError) as err:
        emulator.control.advance(-1)
    assert err.value.status == 400
    assert err.value.param == "seconds"


def test_reset_forgets_objects_and_restores_settings_and_clock(emulator, api):
    api.ready_resource()
    emulator.control.configure(conflict_status=400, timings={"resource_pending": 9})
    emulator.control.advance(10_000)
    emulator.control.reset()
    assert emulator.control.state()["model_resources"] == []
    settings = emulator.control.settings()
    assert settings["conflict_status"] == 409
    assert settings["timings"]["resource_pending"] == 0.0
    offset = emulator.control._call("GET", "/clock")["offset"]
    assert offset == 0.0


# ----------------------------------------------------------------------------- forced stop ordering


def _forced_stop_with_sessions(emulator, api, *, resource_stopping, session_stopping, sessions=2):
    emulator.control.configure(
        timings={"resource_stopping": resource_stopping, "session_stopping": session_stopping}
    )
    rid = api.ready_resource()["id"]
    sids = [api.session(rid)["id"] for _ in range(sessions)]
    assert all(api.get_session(sid)["status"] == S_RUNNING for sid in sids)
    stopped_at = ts(api.ok("POST", f"{RESOURCES}/{rid}/stop", params={"force": "true"})["updated_at"])
    return rid, sids, stopped_at


def test_forced_stop_keeps_the_resource_stopping_until_its_sessions_are_stopped(emulator, api):
    """session_stopping > resource_stopping: the resource must not be STOPPED while a session still stops."""
    rid, sids, stopped_at = _forced_stop_with_sessions(
        emulator, api, resource_stopping=1, session_stopping=30
    )

    emulator.control.advance(5)  # past the resource's own 1 s, well before the sessions' 30 s
    assert api.get_resource(rid)["status"] == R_STOPPING
    assert [api.get_session(sid)["status"] for sid in sids] == [S_STOPPING, S_STOPPING]

    emulator.control.advance(20)  # 25 s in: still not
    assert api.get_resource(rid)["status"] == R_STOPPING
    assert emulator.control.state()["model_resources"][0]["status"] == R_STOPPING

    emulator.control.advance(10)  # 35 s in
    resource = api.get_resource(rid)
    assert resource["status"] == R_STOPPED
    sessions = [api.get_session(sid) for sid in sids]
    assert [s["status"] for s in sessions] == [S_STOPPED, S_STOPPED]
    # The resource stopped the instant its last session did, not when it was first observed.
    assert ts(resource["updated_at"]) == stopped_at + timedelta(seconds=30)
    assert all(ts(s["updated_at"]) == stopped_at + timedelta(seconds=30) for s in sessions)


def test_a_resource_never_reads_stopped_with_a_session_still_stopping(emulator, api):
    """Observed at every second of the stop, through the list endpoints and the control API's snapshot."""
    rid, sids, _ = _forced_stop_with_sessions(emulator, api, resource_stopping=2, session_stopping=7)
    seen = []
    for _ in range(10):
        emulator.control.advance(1)
        resource = api.ok("GET", RESOURCES)["data"][0]
        listed = api.ok("GET", SESSIONS, params={"model_resources_id": rid})["data"]
        assert sorted(s["id"] for s in listed) == sorted(sids)
        if resource["status"] == R_STOPPED:
            assert all(s["status"] == S_STOPPED for s in listed), listed
        snapshot = emulator.control.state()
        if snapshot["model_resources"][0]["status"] == R_STOPPED:
            assert all(s["status"] == S_STOPPED for s in snapshot["training_sessions"])
        seen.append(resource["status"])
    assert seen == [R_STOPPING] * 6 + [R_STOPPED] * 4


def test_forced_stop_with_a_session_already_stopping_waits_for_it_too(emulator, api):
    emulator.control.configure(timings={"resource_stopping": 1, "session_stopping": 30})
    rid = api.ready_resource()["id"]
    early = api.session(rid)["id"]
    late = api.session(rid)["id"]
    early_stop = ts(api.ok("POST", f"{SESSIONS}/{early}/stop")["updated_at"])
    emulator.control.advance(10)
    api.ok("POST", f"{RESOURCES}/{rid}/stop", params={"force": "true"})
    emulator.control.advance(25)  # the early session is STOPPED (30 s), the late one still STOPPING
    assert api.get_session(early)["status"] == S_STOPPED
    assert ts(api.get_session(early)["updated_at"]) == early_stop + timedelta(seconds=30)
    assert api.get_session(late)["status"] == S_STOPPING
    assert api.get_resource(rid)["status"] == R_STOPPING
    emulator.control.advance(10)
    assert api.get_session(late)["status"] == S_STOPPED
    assert api.get_resource(rid)["status"] == R_STOPPED


def test_forced_stop_with_a_slower_resource_stop_keeps_its_own_timing(emulator, api):
    rid, sids, stopped_at = _forced_stop_with_sessions(
        emulator, api, resource_stopping=20, session_stopping=5
    )
    emulator.control.advance(10)
    assert [api.get_session(sid)["status"] for sid in sids] == [S_STOPPED, S_STOPPED]
    assert api.get_resource(rid)["status"] == R_STOPPING
    emulator.control.advance(15)
    resource = api.get_resource(rid)
    assert resource["status"] == R_STOPPED
    assert ts(resource["updated_at"]) == stopped_at + timedelta(seconds=20)


def test_forced_stop_with_equal_timings_stops_sessions_first_and_keeps_armed_failures(emulator, api):
    rid, sids, stopped_at = _forced_stop_with_sessions(emulator, api, resource_stopping=5, session_stopping=5)
    emulator.control.fail_next("training_session", "TRAINING_SESSION_ERROR_CODE_SESSION_FAILED", id=sids[1])
    emulator.control.advance(6)
    assert api.get_resource(rid)["status"] == R_STOPPED
    first, second = (api.get_session(sid) for sid in sids)
    assert first["status"] == S_STOPPED
    assert second["status"] == S_ERROR  # the failure armed on the stopping session still fired
    assert second["error"]["code"] == "TRAINING_SESSION_ERROR_CODE_SESSION_FAILED"
    assert ts(first["updated_at"]) == ts(second["updated_at"]) == stopped_at + timedelta(seconds=5)
