"""Injected faults (status, times, seeded probability, Retry-After, latency, dropped connections,
act-then-fail) and the request log, observed with a real httpx client over loopback."""

from __future__ import annotations

import time

import httpx
import pytest
from emulator_helpers import R_READY, RESOURCES, SESSIONS, SMALL_MODEL

from pulumi_together_rl.emulator.control import EmulatorControlError

TRANSPORT_ERRORS = (httpx.RemoteProtocolError, httpx.ReadError)


def test_status_fault_answers_the_envelope_for_its_times_then_stops(emulator, api):
    fault = emulator.control.add_fault(method="GET", path=r"^/v1/rl/model-resources$", status=503, times=2)
    for _ in range(2):
        err = api.error("GET", RESOURCES, 503)
        assert err["type"] == "server_error"
        assert err["code"] == "emulator_fault"
    api.ok("GET", RESOURCES)
    [rule] = emulator.control.faults()
    assert rule["id"] == fault
    assert rule["fired"] == 2
    assert rule["remaining"] == 0
    log = emulator.control.requests()
    assert [(e["status"], e["fault"], e["handled"]) for e in log] == [
        (503, fault, False),
        (503, fault, False),
        (200, None, True),
    ]


def test_status_fault_before_acting_creates_nothing(emulator, api):
    emulator.control.add_fault(method="POST", path="model-resources$", status=500)
    api.error("POST", RESOURCES, 500, json={"base_model": SMALL_MODEL})
    assert emulator.control.state()["model_resources"] == []
    assert api.resource()["status"] == "MODEL_RESOURCES_STATUS_PENDING"


def test_times_null_fails_every_time_until_cleared(emulator, api):
    emulator.control.add_fault(path="supported-models", status=502, times=None)
    for _ in range(3):
        api.error("GET", "/v1/rl/supported-models", 502)
    emulator.control.clear_faults()
    assert emulator.control.faults() == []
    api.ok("GET", "/v1/rl/supported-models")


def test_a_removed_fault_no_longer_fires(emulator, api):
    fault = emulator.control.add_fault(status=500, times=None)
    emulator.control.remove_fault(fault)
    api.ok("GET", RESOURCES)


def test_retry_after_headers_are_sent(emulator, api):
    emulator.control.add_fault(path="model-resources", status=429, retry_after=2)
    emulator.control.add_fault(path="model-resources", status=503, retry_after=0.25, retry_after_ms=250)
    throttled = api.http.get(RESOURCES)
    assert throttled.status_code == 429
    assert throttled.headers["Retry-After"] == "2"
    assert throttled.json()["error"]["type"] == "rate_limit_error"
    unavailable = api.http.get(RESOURCES)
    assert unavailable.status_code == 503
    assert unavailable.headers["Retry-After"] == "0.25"
    assert unavailable.headers["retry-after-ms"] == "250"


def test_method_and_path_must_both_match(emulator, api):
    emulator.control.add_fault(method="POST", path="training-sessions", status=500, times=None)
    api.ok("GET", SESSIONS)
    api.ok("GET", RESOURCES)
    api.error("POST", SESSIONS, 500, json={"model_resources_id": "x"})


def test_control_api_is_never_faulted(emulator):
    emulator.control.add_fault(status=500, times=None)
    emulator.control.settings()
    emulator.control.state()
    assert emulator.control.requests() == []


def _statuses_with_seed(emulator, api, seed):
    emulator.control.reset()
    emulator.control.add_fault(path="model-resources", status=503, times=None, probability=0.5, seed=seed)
    return [api.http.get(RESOURCES).status_code for _ in range(16)]


def test_seeded_probability_is_reproducible(emulator, api):
    first = _statuses_with_seed(emulator, api, seed=1234)
    second = _statuses_with_seed(emulator, api, seed=1234)
    assert first == second
    assert set(first) == {200, 503}
    other = _statuses_with_seed(emulator, api, seed=99)
    assert other != first


def test_latency_delays_the_answer(emulator, api):
    emulator.control.add_fault(path="supported-models", status=None, latency=0.3)
    start = time.monotonic()
    api.ok("GET", "/v1/rl/supported-models")
    assert time.monotonic() - start >= 0.3
    start = time.monotonic()
    api.ok("GET", "/v1/rl/supported-models")  # times=1: only the first request was delayed
    assert time.monotonic() - start < 0.3


def test_a_read_timeout_on_create_is_ambiguous_the_server_still_acts(emulator, api):
    emulator.control.add_fault(path="model-resources$", method="POST", status=None, latency=0.3)
    with pytest.raises(httpx.ReadTimeout):
        api.http.post(RESOURCES, json={"base_model": SMALL_MODEL}, timeout=0.1)
    deadline = time.monotonic() + 3
    while not emulator.control.state()["model_resources"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(emulator.control.state()["model_resources"]) == 1


def test_dropped_connection_is_a_transport_error_and_nothing_is_created(emulator, api):
    fault = emulator.control.add_fault(method="POST", path="model-resources$", drop_connection=True)
    with pytest.raises(TRANSPORT_ERRORS):
        api.http.post(RESOURCES, json={"base_model": SMALL_MODEL})
    assert emulator.control.state()["model_resources"] == []
    [entry] = emulator.control.requests()
    assert entry["status"] is None
    assert entry["fault"] == fault
    assert entry["handled"] is False
    assert entry["body"] == {"base_model": SMALL_MODEL}
    # The same client keeps working on a fresh connection.
    assert api.resource()["status"] == "MODEL_RESOURCES_STATUS_PENDING"


def test_dropped_connection_is_silent_in_the_server_log(emulator, api, caplog):
    emulator.control.add_fault(path="supported-models", drop_connection=True)
    with caplog.at_level("DEBUG", logger="uvicorn.error"), pytest.raises(TRANSPORT_ERRORS):
        api.http.get("/v1/rl/supported-models")
    api.ok("GET", "/v1/rl/supported-models")
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]


def test_act_then_fail_applies_the_create_then_answers_5xx(emulator, api):
    fault = emulator.control.add_fault(method="POST", path="model-resources$", status=500, act_then_fail=True)
    api.error("POST", RESOURCES, 500, json={"base_model": SMALL_MODEL})
    [made] = emulator.control.state()["model_resources"]
    assert made["base_model"] == SMALL_MODEL
    [entry] = emulator.control.requests()
    assert entry["fault"] == fault
    assert entry["status"] == 500
    assert entry["handled"] is True
    assert entry["handler_status"] == 200


def test_act_then_fail_with_drop_applies_the_create_then_drops(emulator, api):
    rid = api.ready_resource()["id"]
    emulator.control.add_fault(
        method="POST", path="training-sessions$", act_then_fail=True, drop_connection=True
    )
    with pytest.raises(TRANSPORT_ERRORS):
        api.http.post(SESSIONS, json={"model_resources_id": rid, "display_name": "once"})
    sessions = emulator.control.state()["training_sessions"]
    assert [s["display_name"] for s in sessions] == ["once"]


def test_act_then_fail_on_stop_changes_state(emulator, api):
    rid = api.ready_resource()["id"]
    emulator.control.add_fault(path="/stop$", status=503, act_then_fail=True)
    api.error("POST", f"{RESOURCES}/{rid}/stop", 503)
    assert api.get_resource(rid)["status"] in (
        "MODEL_RESOURCES_STATUS_STOPPING",
        "MODEL_RESOURCES_STATUS_STOPPED",
    )


@pytest.mark.parametrize(
    ("rule", "param"),
    [
        ({"status": 99}, "status"),
        # Only error statuses: a 1xx makes h11 refuse the answer (the client would see a dropped connection),
        # a 204/304 cannot carry the envelope, and a 2xx/3xx "fault" would pose as a success or a redirect.
        ({"status": 100}, "status"),
        ({"status": 200}, "status"),
        ({"status": 204}, "status"),
        ({"status": 302}, "status"),
        ({"status": 399}, "status"),
        ({"status": 600}, "status"),
        ({"status": "503"}, "status"),
        ({"times": 0}, "times"),
        ({"probability": 1.5}, "probability"),
        ({"path": "("}, "path"),
        ({"latency": -1}, "latency"),
        ({"duration": 0}, "duration"),
        ({"armed_by": "("}, "armed_by"),
        ({"armed_by": 3}, "armed_by"),
        ({"status": None, "act_then_fail": True}, "act_then_fail"),
        ({"explode": True}, "explode"),
    ],
)
def test_invalid_fault_rules_are_refused(emulator, rule, param):
    with pytest.raises(EmulatorControlError) as err:
        emulator.control.add_fault(**rule)
    assert err.value.status == 400
    assert err.value.param == param


def test_request_log_records_public_requests_without_secrets(emulator, api):
    api.http.get(RESOURCES, params={"limit": 5}, headers={"User-Agent": "probe/1.0"})
    api.http.post(RESOURCES, json={"base_model": SMALL_MODEL})
    log = emulator.control.requests(clear=True)
    assert [(e["method"], e["path"], e["query"], e["status"]) for e in log] == [
        ("GET", RESOURCES, "limit=5", 200),
        ("POST", RESOURCES, "", 200),
    ]
    assert log[0]["user_agent"] == "probe/1.0"
    assert log[1]["body"] == {"base_model": SMALL_MODEL}
    assert all(e["at"].endswith("Z") for e in log)
    assert emulator.api_key not in repr(log)
    assert emulator.control.requests() == []


def test_request_log_can_be_cleared(emulator, api):
    api.ok("GET", RESOURCES)
    emulator.control.clear_requests()
    assert emulator.control.requests() == []


@pytest.mark.parametrize("status", [400, 404, 499, 500, 599])
def test_fault_status_bounds_400_and_599_are_accepted_and_answer_the_envelope(emulator, api, status):
    emulator.control.add_fault(path="supported-models", status=status)
    err = api.error("GET", "/v1/rl/supported-models", status)
    assert err["code"] == "emulator_fault"


def test_an_armed_by_rule_fires_only_after_its_trigger_succeeded_and_only_for_its_duration(emulator, api):
    fault = emulator.control.add_fault(
        method="GET",
        path=r"^/v1/rl/model-resources$",
        status=503,
        times=None,
        duration=1.0,
        armed_by=r"^POST /v1/rl/model-resources$",
    )
    api.ok("GET", RESOURCES)  # not armed yet
    # A refused trigger (400) does not arm it either.
    api.error("POST", RESOURCES, 400, json={"base_model": "Acme/NotAModel"})
    api.ok("GET", RESOURCES)
    assert emulator.control.faults()[0]["armed"] is False

    api.resource()  # a create the handler answered 2xx: armed from now on, for 1 s
    api.error("GET", RESOURCES, 503)
    assert emulator.control.faults()[0]["armed"] is True
    time.sleep(1.2)
    api.ok("GET", RESOURCES)
    assert [e["fault"] for e in emulator.control.requests()].count(fault) == 1


# ----------------------------------------------------------------------------------------- list extras


def test_list_extras_are_appended_raw_to_every_answer_of_their_list_only(emulator, api):
    resource = api.ready_resource()
    session = api.session(resource["id"])
    poison = {"id": "mr_poison", "status": 7, "nested": {"kept": [1, "two"]}}
    emulator.control.set_list_extras("model-resources", [poison, "not even an object"])

    everything = api.ok("GET", RESOURCES)
    filtered = api.ok("GET", RESOURCES, params={"status": R_READY, "created_by": "me", "limit": 1})
    sessions = api.ok("GET", SESSIONS)

    assert everything["data"] == [api.get_resource(resource["id"]), poison, "not even an object"]
    assert filtered["data"][1:] == [poison, "not even an object"]  # whatever the filters and page
    assert [s["id"] for s in sessions["data"]] == [session["id"]]  # another list: untouched
    api.error("GET", f"{RESOURCES}/mr_poison", 404)  # an extra is no object of the state
    assert emulator.control.list_extras() == {"model-resources": [poison, "not even an object"]}


def test_list_extras_are_replaced_cleared_and_forgotten_on_reset(emulator, api):
    control = emulator.control
    control.set_list_extras("training-sessions", [{"id": "ts_a"}])
    control.set_list_extras("training-sessions", [{"id": "ts_b"}])
    assert api.ok("GET", SESSIONS)["data"] == [{"id": "ts_b"}]
    control.set_list_extras("training-sessions", [])
    assert api.ok("GET", SESSIONS)["data"] == []
    control.set_list_extras("model-resources", [{"id": "mr_x"}])
    control.reset()
    assert api.ok("GET", RESOURCES)["data"] == []
    assert control.list_extras() == {}


def test_list_extras_refuse_an_unknown_list_and_items_that_are_not_a_list(emulator):
    with pytest.raises(EmulatorControlError) as unknown:
        emulator.control.set_list_extras("supported-models", [{}])
    assert unknown.value.status == 404 and unknown.value.param == "collection"
    with pytest.raises(EmulatorControlError) as not_a_list:
        emulator.control.set_list_extras("model-resources", {"id": "x"})
    assert not_a_list.value.status == 400 and not_a_list.value.param == "items"
