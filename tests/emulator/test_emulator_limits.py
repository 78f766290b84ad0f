"""Session caps, the force rule on resource stop, READY-only session create, LoRA rules."""

from __future__ import annotations

import threading

import httpx
from emulator_helpers import (
    BIG_MODEL,
    R_READY,
    R_STOPPED,
    R_STOPPING,
    RESOURCES,
    S_RUNNING,
    S_STOPPED,
    S_STOPPING,
    SESSIONS,
)


def test_sixth_session_on_a_lora_resource_is_refused_with_429_and_retry_after(api):
    rid = api.ready_resource()["id"]
    for _ in range(5):
        api.session(rid)
    response = api.http.post(SESSIONS, json={"model_resources_id": rid})
    assert response.status_code == 429
    assert int(response.headers["Retry-After"]) >= 1
    err = response.json()["error"]
    assert err["type"] == "rate_limit_error"
    assert err["code"] == "session_limit_reached"
    listed = api.ok("GET", SESSIONS, params={"model_resources_id": rid})
    assert len(listed["data"]) == 5


def test_full_weight_resource_takes_a_single_session(api):
    rid = api.ready_resource(lora_enabled=False)["id"]
    session = api.session(rid)
    assert "lora_config" not in session
    err = api.error("POST", SESSIONS, 429, json={"model_resources_id": rid})
    assert err["code"] == "session_limit_reached"


def test_a_stopping_session_still_holds_its_slot(emulator, api):
    emulator.control.configure(timings={"session_stopping": 30})
    rid = api.ready_resource(lora_enabled=False)["id"]
    sid = api.session(rid)["id"]
    api.ok("POST", f"{SESSIONS}/{sid}/stop")
    response = api.http.post(SESSIONS, json={"model_resources_id": rid})
    assert response.status_code == 429
    # Retry-After points at the moment the stopping session frees its slot.
    assert 25 <= int(response.headers["Retry-After"]) <= 30
    emulator.control.advance(31)
    assert api.get_session(sid)["status"] == S_STOPPED
    assert api.session(rid)["status"] == "TRAINING_SESSION_STATUS_CREATING"


def test_caps_follow_the_settings(emulator, api):
    emulator.control.configure(session_cap_lora=2, session_cap_full=0)
    lora = api.ready_resource()["id"]
    api.session(lora)
    api.session(lora)
    api.error("POST", SESSIONS, 429, json={"model_resources_id": lora})
    full = api.ready_resource(lora_enabled=False)["id"]
    api.error("POST", SESSIONS, 429, json={"model_resources_id": full})


def test_concurrent_creates_never_exceed_the_cap(emulator, api):
    rid = api.ready_resource()["id"]
    statuses: list[int] = []
    lock = threading.Lock()

    def create() -> None:
        with httpx.Client(base_url=emulator.base_url, headers={"Authorization": "Bearer k"}) as http:
            code = http.post(SESSIONS, json={"model_resources_id": rid}).status_code
        with lock:
            statuses.append(code)

    threads = [threading.Thread(target=create) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == [200] * 5 + [429] * 7


def test_session_create_on_a_resource_that_is_not_ready_is_a_conflict(emulator, api):
    emulator.control.configure(timings={"resource_pending": 100})
    rid = api.resource()["id"]
    err = api.error("POST", SESSIONS, 409, json={"model_resources_id": rid})
    assert err["type"] == "conflict"
    assert err["code"] == "resource_not_ready"


def test_session_create_on_a_stopped_resource_is_a_conflict(api):
    rid = api.ready_resource()["id"]
    api.ok("POST", f"{RESOURCES}/{rid}/stop")
    api.error("POST", SESSIONS, 409, json={"model_resources_id": rid})


def test_delete_with_attached_sessions_needs_force(api):
    rid = api.ready_resource()["id"]
    s1, s2 = api.session(rid)["id"], api.session(rid)["id"]
    err = api.error("POST", f"{RESOURCES}/{rid}/stop", 409)
    assert err["type"] == "conflict"
    assert err["code"] == "sessions_attached"
    assert s1 in err["message"] and s2 in err["message"]
    assert api.get_resource(rid)["status"] == R_READY
    assert api.get_session(s1)["status"] == S_RUNNING

    explicit_false = api.error("POST", f"{RESOURCES}/{rid}/stop", 409, params={"force": "false"})
    assert explicit_false["code"] == "sessions_attached"


def test_forced_stop_stops_the_attached_sessions_too(emulator, api):
    emulator.control.configure(timings={"session_stopping": 10, "resource_stopping": 10})
    rid = api.ready_resource()["id"]
    sids = [api.session(rid)["id"] for _ in range(2)]
    stopped = api.ok("POST", f"{RESOURCES}/{rid}/stop", params={"force": "true"})
    assert stopped["status"] == R_STOPPING
    assert [api.get_session(s)["status"] for s in sids] == [S_STOPPING, S_STOPPING]
    emulator.control.advance(11)
    assert api.get_resource(rid)["status"] == R_STOPPED
    assert [api.get_session(s)["status"] for s in sids] == [S_STOPPED, S_STOPPED]


def test_stop_after_sessions_were_stopped_needs_no_force(api):
    rid = api.ready_resource()["id"]
    sid = api.session(rid)["id"]
    api.ok("POST", f"{SESSIONS}/{sid}/stop")
    # Zero timings: the session reached STOPPED before the resource stop is evaluated.
    assert api.ok("POST", f"{RESOURCES}/{rid}/stop")["status"] == R_STOPPING


def test_a_stopping_session_blocks_a_stop_without_force(emulator, api):
    emulator.control.configure(timings={"session_stopping": 30})
    rid = api.ready_resource()["id"]
    sid = api.session(rid)["id"]
    api.ok("POST", f"{SESSIONS}/{sid}/stop")
    err = api.error("POST", f"{RESOURCES}/{rid}/stop", 409)
    assert sid in err["message"]


def test_conflict_status_is_configurable(emulator, api):
    emulator.control.configure(conflict_status=400)
    rid = api.ready_resource()["id"]
    api.session(rid)
    err = api.error("POST", f"{RESOURCES}/{rid}/stop", 400)
    assert err["code"] == "sessions_attached"


def test_invalid_force_value_is_a_400(api):
    rid = api.ready_resource()["id"]
    err = api.error("POST", f"{RESOURCES}/{rid}/stop", 400, params={"force": "maybe"})
    assert err["param"] == "force"


def test_lora_config_is_refused_on_a_full_weight_resource(api):
    rid = api.ready_resource(lora_enabled=False)["id"]
    err = api.error("POST", SESSIONS, 400, json={"model_resources_id": rid, "lora_config": {"rank": 8}})
    assert err["param"] == "lora_config"


def test_lora_config_is_defaulted_and_int64_seed_is_a_string(api):
    rid = api.ready_resource()["id"]
    defaulted = api.session(rid)
    assert defaulted["lora_config"] == {"rank": 32, "alpha": 64, "dropout": 0.0, "train_unembed": True}
    seeded = api.session(rid, lora_config={"rank": 64, "seed": 59, "train_unembed": False})
    assert seeded["lora_config"]["seed"] == "59"
    assert seeded["lora_config"]["rank"] == 64
    assert seeded["lora_config"]["train_unembed"] is False
    string_seed = api.session(rid, lora_config={"seed": "60"})
    assert string_seed["lora_config"]["seed"] == "60"


def test_lora_rank_is_capped_by_the_models_max_rank(api):
    rid = api.ready_resource(base_model=BIG_MODEL)["id"]
    err = api.error("POST", SESSIONS, 400, json={"model_resources_id": rid, "lora_config": {"rank": 33}})
    assert err["param"] == "lora_config.rank"
    assert api.session(rid, lora_config={"rank": 32})["lora_config"]["rank"] == 32


def test_lora_alpha_and_dropout_ranges(api):
    rid = api.ready_resource()["id"]
    alpha = api.error("POST", SESSIONS, 400, json={"model_resources_id": rid, "lora_config": {"alpha": 129}})
    assert alpha["param"] == "lora_config.alpha"
    dropout = api.error(
        "POST", SESSIONS, 400, json={"model_resources_id": rid, "lora_config": {"dropout": 1.0}}
    )
    assert dropout["param"] == "lora_config.dropout"
