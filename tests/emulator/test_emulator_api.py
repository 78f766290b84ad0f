"""PATCH semantics, pagination, auth, validation, 404s, create defaults, estimate-cost, supported models."""

from __future__ import annotations

import httpx
import pytest
from emulator_helpers import (
    BIG_MODEL,
    R_PENDING,
    R_READY,
    R_STOPPED,
    RESOURCES,
    SESSIONS,
    SMALL_MODEL,
    TRAINER_ONLY_MODEL,
)
from together.types.post_training import RlSupportedModels

from pulumi_together_rl.emulator.control import EmulatorControlError

WANDB = {
    "entity": "org",
    "project": "grpo",
    "group": "sweep",
    "run_id": "abc",
    "run_name": "exp",
    "url": "https://w",
}

# --------------------------------------------------------------------------------------------------- PATCH


def test_patch_leaves_omitted_fields_unchanged(api):
    rid = api.ready_resource()["id"]
    session = api.session(rid, display_name="first", metadata={"wandb": WANDB})
    patched = api.ok("PATCH", f"{SESSIONS}/{session['id']}", json={"metadata": {"wandb": {"group": "g2"}}})
    assert patched["display_name"] == "first"
    assert patched["metadata"]["wandb"] == {**WANDB, "group": "g2"}
    renamed = api.ok("PATCH", f"{SESSIONS}/{session['id']}", json={"display_name": "second"})
    assert renamed["display_name"] == "second"
    assert renamed["metadata"]["wandb"] == {**WANDB, "group": "g2"}


def test_patch_empty_string_clears_the_display_name_and_single_wandb_keys(api):
    rid = api.ready_resource()["id"]
    sid = api.session(rid, display_name="named", metadata={"wandb": {"project": "p", "run_id": "r"}})["id"]
    cleared = api.ok(
        "PATCH", f"{SESSIONS}/{sid}", json={"display_name": "", "metadata": {"wandb": {"run_id": ""}}}
    )
    assert "display_name" not in cleared
    assert cleared["metadata"] == {"wandb": {"project": "p"}}
    emptied = api.ok("PATCH", f"{SESSIONS}/{sid}", json={"metadata": {"wandb": {"project": ""}}})
    assert emptied["metadata"] == {}
    assert api.get_session(sid) == emptied


def test_patch_with_an_empty_body_changes_nothing(api):
    rid = api.ready_resource()["id"]
    session = api.session(rid, display_name="keep", metadata={"wandb": {"project": "p"}})
    current = api.get_session(session["id"])
    assert api.ok("PATCH", f"{SESSIONS}/{session['id']}", json={}) == current
    assert api.ok("PATCH", f"{SESSIONS}/{session['id']}", json={"metadata": {"wandb": None}}) == current


def test_patch_display_name_longer_than_128_is_a_400(api):
    rid = api.ready_resource()["id"]
    sid = api.session(rid)["id"]
    err = api.error("PATCH", f"{SESSIONS}/{sid}", 400, json={"display_name": "x" * 129})
    assert err["param"] == "display_name"
    assert api.ok("PATCH", f"{SESSIONS}/{sid}", json={"display_name": "x" * 128})["display_name"] == "x" * 128


def test_patch_wrong_type_names_the_nested_field(api):
    rid = api.ready_resource()["id"]
    sid = api.session(rid)["id"]
    err = api.error("PATCH", f"{SESSIONS}/{sid}", 400, json={"metadata": {"wandb": {"url": 5}}})
    assert err["param"] == "metadata.wandb.url"


def test_patch_of_an_unknown_session_is_a_404(api):
    err = api.error("PATCH", f"{SESSIONS}/nope", 404, json={"display_name": "x"})
    assert err["type"] == "not_found"


# ---------------------------------------------------------------------------------------------- pagination


def _ids(page):
    return [item["id"] for item in page["data"]]


def test_lists_are_newest_first_and_paginate_with_after(api):
    created = [api.resource()["id"] for _ in range(5)]
    newest_first = created[::-1]
    page1 = api.ok("GET", RESOURCES, params={"limit": 2})
    assert _ids(page1) == newest_first[:2]
    assert page1["meta"] == {"limit": 2, "has_more": True, "next_cursor": newest_first[1]}
    page2 = api.ok("GET", RESOURCES, params={"limit": 2, "after": page1["meta"]["next_cursor"]})
    assert _ids(page2) == newest_first[2:4]
    page3 = api.ok("GET", RESOURCES, params={"limit": 2, "after": page2["meta"]["next_cursor"]})
    assert _ids(page3) == newest_first[4:]
    assert page3["meta"] == {"limit": 2, "has_more": False, "next_cursor": ""}


def test_an_exactly_full_last_page_has_an_empty_cursor(api):
    for _ in range(2):
        api.resource()
    page = api.ok("GET", RESOURCES, params={"limit": 2})
    assert page["meta"] == {"limit": 2, "has_more": False, "next_cursor": ""}
    empty = api.ok("GET", SESSIONS)
    assert empty == {"data": [], "meta": {"limit": 20, "has_more": False, "next_cursor": ""}}


def test_default_limit_is_20(api):
    for _ in range(21):
        api.resource()
    page = api.ok("GET", RESOURCES)
    assert len(page["data"]) == 20
    assert page["meta"]["limit"] == 20
    assert page["meta"]["has_more"] is True


@pytest.mark.parametrize("limit", ["0", "101", "-1", "ten", "1.5"])
def test_limit_outside_1_to_100_is_a_400(api, limit):
    err = api.error("GET", RESOURCES, 400, params={"limit": limit})
    assert err["param"] == "limit"
    assert api.error("GET", SESSIONS, 400, params={"limit": limit})["param"] == "limit"


def test_limit_bounds_1_and_100_are_accepted(api):
    api.resource()
    assert api.ok("GET", RESOURCES, params={"limit": 1})["meta"]["limit"] == 1
    assert api.ok("GET", RESOURCES, params={"limit": 100})["meta"]["limit"] == 100


def test_unknown_after_cursor_is_a_400(api):
    err = api.error("GET", RESOURCES, 400, params={"after": "no-such-id"})
    assert err["param"] == "after"
    assert api.error("GET", SESSIONS, 400, params={"after": "no-such-id"})["param"] == "after"


def test_after_cursor_still_works_when_its_object_left_the_filter(emulator, api):
    emulator.control.configure(timings={"resource_pending": 100})
    ids = [api.resource()["id"] for _ in range(3)][::-1]  # newest first
    page1 = api.ok("GET", RESOURCES, params={"status": R_PENDING, "limit": 1})
    assert _ids(page1) == ids[:1]
    api.ok("POST", f"{RESOURCES}/{ids[0]}/stop")  # the cursor object is no longer PENDING
    page2 = api.ok("GET", RESOURCES, params={"status": R_PENDING, "limit": 5, "after": ids[0]})
    assert _ids(page2) == ids[1:]


def test_status_filter_accepts_comma_joined_and_repeated_values(emulator, api):
    ready = api.ready_resource()["id"]
    stopped = api.ready_resource()["id"]
    api.ok("POST", f"{RESOURCES}/{stopped}/stop")
    emulator.control.configure(timings={"resource_pending": 100})
    pending = api.resource()["id"]
    assert _ids(api.ok("GET", RESOURCES, params={"status": R_READY})) == [ready]
    joined = api.ok("GET", RESOURCES, params={"status": f"{R_READY},{R_PENDING}"})
    assert set(_ids(joined)) == {ready, pending}
    repeated = api.ok("GET", RESOURCES, params=[("status", R_STOPPED), ("status", R_PENDING)])
    assert set(_ids(repeated)) == {stopped, pending}
    err = api.error("GET", RESOURCES, 400, params={"status": "READY"})
    assert err["param"] == "status"


def test_created_by_me_is_the_callers_user_id(emulator, api):
    mine = api.resource()["id"]
    emulator.control.configure(user_id="user_someone_else")
    theirs = api.resource()
    assert theirs["created_by"] == "user_someone_else"
    emulator.control.configure(user_id="user_emulator")
    assert _ids(api.ok("GET", RESOURCES, params={"created_by": "me"})) == [mine]
    assert _ids(api.ok("GET", RESOURCES, params={"created_by": "user_someone_else"})) == [theirs["id"]]
    assert len(api.ok("GET", RESOURCES)["data"]) == 2


def test_sessions_filter_by_resource_status_and_creator(api):
    r1 = api.ready_resource()["id"]
    r2 = api.ready_resource()["id"]
    a = api.session(r1)["id"]
    b = api.session(r2)["id"]
    api.ok("POST", f"{SESSIONS}/{b}/stop")
    assert _ids(api.ok("GET", SESSIONS, params={"model_resources_id": r1})) == [a]
    assert _ids(api.ok("GET", SESSIONS, params={"status": "TRAINING_SESSION_STATUS_STOPPED"})) == [b]
    assert set(_ids(api.ok("GET", SESSIONS, params={"created_by": "me"}))) == {a, b}
    assert _ids(api.ok("GET", SESSIONS, params={"model_resources_id": "unknown"})) == []


# ---------------------------------------------------------------------------------------------------- auth


def test_missing_or_empty_bearer_key_is_a_401(emulator):
    with httpx.Client(base_url=emulator.base_url) as bare:
        for headers in ({}, {"Authorization": "Bearer"}, {"Authorization": "Basic abc"}):
            response = bare.get(RESOURCES, headers=headers)
            assert response.status_code == 401
            assert response.json()["error"]["type"] == "authentication_error"
            assert response.json()["error"]["code"] == "missing_api_key"


def test_any_non_empty_key_is_accepted_unless_one_is_configured(emulator):
    with httpx.Client(base_url=emulator.base_url) as bare:
        assert bare.get(RESOURCES, headers={"Authorization": "Bearer whatever"}).status_code == 200
        emulator.control.configure(api_key="the-key")
        wrong = bare.get(RESOURCES, headers={"Authorization": "Bearer whatever"})
        assert wrong.status_code == 401
        assert wrong.json()["error"]["code"] == "invalid_api_key"
        assert "whatever" not in wrong.text
        assert bare.get(RESOURCES, headers={"Authorization": "Bearer the-key"}).status_code == 200


def test_auth_is_checked_before_body_validation(emulator):
    with httpx.Client(base_url=emulator.base_url) as bare:
        assert bare.post(RESOURCES, content=b"not json").status_code == 401


def test_control_api_needs_no_key(emulator):
    emulator.control.configure(api_key="the-key")
    with httpx.Client(base_url=emulator.base_url) as bare:
        assert bare.get("/_emulator/settings").status_code == 200


# ---------------------------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({}, "base_model"),
        ({"base_model": ""}, "base_model"),
        ({"base_model": "nobody/none"}, "base_model"),
        ({"base_model": SMALL_MODEL, "inactive_timeout": 299}, "inactive_timeout"),
        ({"base_model": SMALL_MODEL, "inactive_timeout": 86401}, "inactive_timeout"),
        ({"base_model": SMALL_MODEL, "inactive_timeout": "600"}, "inactive_timeout"),
        ({"base_model": SMALL_MODEL, "lora_enabled": "yes"}, "lora_enabled"),
        ({"base_model": SMALL_MODEL, "compute_config": {"gpu_type": "H100-80GB"}}, "compute_config.gpu_type"),
        (
            {"base_model": SMALL_MODEL, "compute_config": {"num_generator_replicas": -1}},
            "compute_config.num_generator_replicas",
        ),
        (
            {"base_model": TRAINER_ONLY_MODEL, "compute_config": {"num_generator_replicas": 1}},
            "compute_config.num_generator_replicas",
        ),
        ({"base_model": SMALL_MODEL, "compute_config": "big"}, "compute_config"),
        ({"base_model": BIG_MODEL, "lora_enabled": False}, "lora_enabled"),
        ({"base_model": SMALL_MODEL, "base_weights_ref": "ml_abc"}, "base_weights_ref"),
        ({"base_model": SMALL_MODEL, "base_weights_ref": "together://ml_" + "a" * 250}, "base_weights_ref"),
        ({"base_model": SMALL_MODEL, "optimizer_config": {"adam": {}, "muon": {}}}, "optimizer_config"),
        ({"base_model": SMALL_MODEL, "optimizer_config": {"adamw": {}}}, "optimizer_config.adamw"),
        (
            {"base_model": SMALL_MODEL, "optimizer_config": {"muon": {"scaling_strategy": "X"}}},
            "optimizer_config.muon.scaling_strategy",
        ),
    ],
)
def test_invalid_create_bodies_are_a_400_naming_the_field(api, body, param):
    err = api.error("POST", RESOURCES, 400, json=body)
    assert err["type"] == "invalid_request_error"
    assert err["param"] == param
    # estimate-cost validates the same body the same way
    assert api.error("POST", f"{RESOURCES}/estimate-cost", 400, json=body)["param"] == param
    assert api.ok("GET", RESOURCES)["data"] == []


@pytest.mark.parametrize("content", [b"", b"not json", b"[1, 2]", b'"text"'])
def test_malformed_bodies_are_a_400_never_a_422(api, content):
    response = api.http.post(RESOURCES, content=content, headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_session_create_validation(api):
    rid = api.ready_resource()["id"]
    assert api.error("POST", SESSIONS, 400, json={})["param"] == "model_resources_id"
    err = api.error("POST", SESSIONS, 400, json={"model_resources_id": rid, "display_name": "x" * 129})
    assert err["param"] == "display_name"
    err = api.error("POST", SESSIONS, 400, json={"model_resources_id": rid, "lora_config": {"rank": "big"}})
    assert err["param"] == "lora_config.rank"
    err = api.error("POST", SESSIONS, 400, json={"model_resources_id": rid, "lora_config": {"seed": "x"}})
    assert err["param"] == "lora_config.seed"
    missing = api.error("POST", SESSIONS, 404, json={"model_resources_id": "nope"})
    assert missing["param"] == "model_resources_id"


def test_extend_expiry_needs_integer_seconds(api):
    rid = api.ready_resource()["id"]
    assert api.error("POST", f"{RESOURCES}/{rid}/extend-expiry", 400, json={})["param"] == "seconds"
    err = api.error("POST", f"{RESOURCES}/{rid}/extend-expiry", 400, json={"seconds": "lots"})
    assert err["param"] == "seconds"


# ------------------------------------------------------------------------------------------- 404 and routes


def test_unknown_ids_are_a_404_with_the_envelope(api):
    for method, path in [
        ("GET", f"{RESOURCES}/nope"),
        ("POST", f"{RESOURCES}/nope/stop"),
        ("POST", f"{SESSIONS}/nope/stop"),
        ("GET", f"{SESSIONS}/nope"),
    ]:
        err = api.error(method, path, 404)
        assert err["type"] == "not_found"
        assert "nope" in err["message"]
    assert (
        api.error("POST", f"{RESOURCES}/nope/extend-expiry", 404, json={"seconds": 600})["type"]
        == "not_found"
    )


def test_unknown_routes_and_wrong_methods_answer_the_envelope(api):
    assert api.error("GET", "/v1/rl/nothing-here", 404)["code"] == "unknown_route"
    assert api.error("GET", "/elsewhere", 404)["code"] == "unknown_route"
    wrong = api.http.delete(f"{RESOURCES}/anything")
    assert wrong.status_code == 405
    assert wrong.json()["error"]["code"] == "method_not_allowed"
    assert api.error("PUT", SESSIONS, 405)["type"] == "invalid_request_error"


# -------------------------------------------------------------------------------------- defaults and pinning


def test_create_fills_server_defaults(api):
    created = api.resource()
    assert created["compute_config"] == {"num_generator_replicas": 1, "gpu_type": "B200-SXM"}
    assert created["optimizer_config"] == {"adam": {}}
    assert created["lora_enabled"] is True
    assert created["inactive_timeout"] == 3600
    assert created["created_by"] == "user_emulator"
    assert "base_weights_ref" not in created
    trainer_only = api.resource(base_model=TRAINER_ONLY_MODEL)
    assert trainer_only["compute_config"]["num_generator_replicas"] == 0


def test_create_echoes_what_was_set(api):
    created = api.resource(
        lora_enabled=False,
        inactive_timeout=900,
        compute_config={"gpu_type": "B200-SXM", "num_generator_replicas": 3},
        optimizer_config={"muon": {"scaling_strategy": "MUON_SCALING_STRATEGY_MATCH_ADAM"}},
        some_future_field="ignored",
    )
    assert created["lora_enabled"] is False
    assert created["inactive_timeout"] == 900
    assert created["compute_config"] == {"num_generator_replicas": 3, "gpu_type": "B200-SXM"}
    assert created["optimizer_config"] == {"muon": {"scaling_strategy": "MUON_SCALING_STRATEGY_MATCH_ADAM"}}
    assert "some_future_field" not in created


def test_base_weights_ref_is_pinned_to_a_stable_revision(api):
    first = api.resource(base_weights_ref="together://ml_A1b2C3")["base_weights_ref"]
    assert first.startswith("together://ml_A1b2C3@rv_")
    assert api.resource(base_weights_ref="together://ml_A1b2C3")["base_weights_ref"] == first
    pinned = "together://ml_A1b2C3@rv_abc123"
    assert api.resource(base_weights_ref=pinned)["base_weights_ref"] == pinned


def test_session_copies_base_model_and_echoes_its_inputs(api):
    rid = api.ready_resource(base_model=BIG_MODEL)["id"]
    session = api.session(rid, display_name="run", resume_from_checkpoint_id="ckpt-1", load_optimizer=False)
    assert session["base_model"] == BIG_MODEL
    assert session["model_resources_id"] == rid
    assert session["display_name"] == "run"
    assert session["resume_from_checkpoint_id"] == "ckpt-1"
    assert session["step"] == "0"
    assert session["policy_state"]["trainer_step"] == "0"
    assert "load_optimizer" not in session


# ------------------------------------------------------------------------------- estimate-cost, models


def test_estimate_cost_prices_from_the_table_and_creates_nothing(api):
    lora = api.ok("POST", f"{RESOURCES}/estimate-cost", json={"base_model": SMALL_MODEL})
    assert lora == {"currency": "USD", "price_per_hour": 11.0}  # 1 trainer + 1 generator GPU at 5.50
    full = api.ok(
        "POST",
        f"{RESOURCES}/estimate-cost",
        json={
            "base_model": SMALL_MODEL,
            "lora_enabled": False,
            "compute_config": {"num_generator_replicas": 2},
        },
    )
    assert full["price_per_hour"] == 22.0  # 2 trainer + 2 generator GPUs
    assert api.ok("GET", RESOURCES)["data"] == []


def test_supported_models_table_and_override(emulator, api):
    models = api.ok("GET", "/v1/rl/supported-models")["data"]
    by_name = {m["base_model"]: m for m in models}
    assert set(by_name) == {SMALL_MODEL, BIG_MODEL, TRAINER_ONLY_MODEL}
    small = by_name[SMALL_MODEL]["compute_configs"][0]
    assert small["trainer_config"]["lora"]["max_rank"] == 64
    assert "full" in small["trainer_config"]
    assert "full" not in by_name[BIG_MODEL]["compute_configs"][0]["trainer_config"]
    assert by_name[BIG_MODEL]["compute_configs"][0]["trainer_config"]["lora"]["max_rank"] == 32
    assert "generator_config" not in by_name[TRAINER_ONLY_MODEL]["compute_configs"][0]

    custom = [
        {
            "base_model": "acme/tiny",
            "default_gpu_type": "B200-SXM",
            "compute_configs": [
                {
                    "gpu_type": "B200-SXM",
                    "trainer_config": {"lora": {"max_batch_size": 1, "max_rank": 8, "max_seq_length": 512}},
                }
            ],
        }
    ]
    emulator.control.configure(supported_models=custom)
    assert api.ok("GET", "/v1/rl/supported-models")["data"] == custom
    assert api.resource(base_model="acme/tiny")["compute_config"]["num_generator_replicas"] == 0
    assert api.error("POST", RESOURCES, 400, json={"base_model": SMALL_MODEL})["param"] == "base_model"


def _tiny_model(**overrides):
    model = {
        "base_model": "acme/tiny",
        "default_gpu_type": "B200-SXM",
        "compute_configs": [
            {
                "gpu_type": "B200-SXM",
                "trainer_config": {"lora": {"max_batch_size": 1, "max_rank": 8, "max_seq_length": 512}},
            }
        ],
    }
    model.update(overrides)
    return model


@pytest.mark.parametrize(
    ("model", "param"),
    [
        (_tiny_model(default_gpu_type="H100-80GB"), "supported_models[0].default_gpu_type"),
        (_tiny_model(default_gpu_type=None), "supported_models[0].default_gpu_type"),
        (
            _tiny_model(compute_configs=[{"gpu_type": "B200-SXM"}, {"gpu_type": "H100-80GB"}]),
            "supported_models[0].compute_configs[1].gpu_type",
        ),
        (_tiny_model(compute_configs=[{}]), "supported_models[0].compute_configs[0].gpu_type"),
        (_tiny_model(compute_configs={"gpu_type": "B200-SXM"}), "supported_models[0].compute_configs"),
    ],
)
def test_custom_supported_models_are_held_to_the_gpu_types_the_sdk_reads(emulator, api, model, param):
    """RlSupportedModel types both gpu_type fields as Literal["B200-SXM"]: H100-80GB would break the SDK."""
    before = api.ok("GET", "/v1/rl/supported-models")
    with pytest.raises(EmulatorControlError) as err:
        emulator.control.configure(supported_models=[model])
    assert err.value.status == 400
    assert err.value.param == param
    assert api.ok("GET", "/v1/rl/supported-models") == before  # nothing changed


def test_an_accepted_custom_supported_models_table_is_readable_by_the_sdk(emulator, api):
    bare = _tiny_model(base_model="acme/bare")
    del bare["compute_configs"]  # optional in RlSupportedModel
    custom = [_tiny_model(), bare]
    emulator.control.configure(supported_models={"data": custom})
    body = api.ok("GET", "/v1/rl/supported-models")
    parsed = RlSupportedModels.model_validate(body)
    assert [m.base_model for m in parsed.data] == ["acme/tiny", "acme/bare"]


def test_settings_reject_unknown_keys_and_bad_values(emulator):
    for bad, param in [
        ({"nope": 1}, "nope"),
        ({"timings": {"resource_pending": -1}}, "timings.resource_pending"),
        ({"timings": {"warp": 1}}, "timings.warp"),
        ({"conflict_status": 200}, "conflict_status"),
        ({"session_cap_lora": -1}, "session_cap_lora"),
        ({"api_key": ""}, "api_key"),
    ]:
        with pytest.raises(EmulatorControlError) as err:
            emulator.control.configure(**bad)
        assert err.value.status == 400
        assert err.value.param == param
    settings = emulator.control.configure(timings={"session_creating": 2.5})
    assert settings["timings"]["session_creating"] == 2.5
    assert settings["timings"]["resource_pending"] == 0.0  # timings merge key by key
