"""The ModelResource provider's methods, called directly, against the emulator over loopback HTTP."""

from __future__ import annotations

import pytest

from pulumi_together_rl import stopping
from pulumi_together_rl.client.models import ModelResourceCreateRequest, TrainingSessionCreateRequest
from pulumi_together_rl.messages import UserError, is_bug, printable
from pulumi_together_rl.resources import lifecycle, process

from .conftest import MODEL, OWNER, configure

STOPPED_OR_STOPPING = {"MODEL_RESOURCES_STATUS_STOPPING", "MODEL_RESOURCES_STATUS_STOPPED"}


def _emulated(rig, id_):
    return next(r for r in rig.control.state()["model_resources"] if r["id"] == id_)


def test_create_waits_until_ready_and_reports_progress(rig, capsys):
    rig.control.configure(timings={"resource_pending": 0.1, "resource_creating": 0.1})

    created = rig.create_resource(compute_config={"num_generator_replicas": 1.0}, inactive_timeout=600.0)

    outs = created.outs
    assert outs["status"] == "READY"
    assert outs["compute_config"] == {"num_generator_replicas": 1}  # declared, ints again
    assert outs["effective_compute_config"] == {"num_generator_replicas": 1, "gpu_type": "B200-SXM"}
    assert outs["effective_optimizer_config"] == {"adam": {}}
    assert outs["effective_inactive_timeout"] == 600
    assert outs["created_by"] and outs["created_at"] and outs["expires_at"]
    assert len(rig.posts("/model-resources")) == 1
    err = capsys.readouterr().err
    assert f"model resource {created.id[:8]}…: PENDING" in err
    assert "READY" in err


def test_check_rejects_a_model_the_api_does_not_offer(rig):
    result = rig.resources.check({}, {"base_model": "Acme/NotAModel"})
    assert [f.property for f in result.failures] == ["base_model"]
    assert MODEL in result.failures[0].reason  # says what to use instead


def test_check_rejects_full_weight_training_where_not_offered(rig):
    result = rig.resources.check({}, {"base_model": "Qwen/Qwen3.5-35B-A3B", "lora_enabled": False})
    assert [f.property for f in result.failures] == ["lora_enabled"]


def test_check_rejects_generator_replicas_on_a_trainer_only_model(rig):
    news = {"base_model": "Qwen/Qwen3-0.6B", "compute_config": {"num_generator_replicas": 2}}
    result = rig.resources.check({}, news)
    assert [f.property for f in result.failures] == ["compute_config.num_generator_replicas"]


def test_check_warns_and_skips_remote_checks_when_the_api_is_unreachable(rig, capsys):
    configure(rig.resources, {"together:apiKey": "k", "together:baseUrl": "http://127.0.0.1:9"})
    result = rig.resources.check({}, {"base_model": "Acme/NotAModel"})
    assert result.failures == []
    assert "warning" in capsys.readouterr().err


def test_error_during_create_stops_the_resource_and_reports_the_api_error(rig):
    rig.control.fail_next("model_resource", "MODEL_RESOURCES_ERROR_CODE_PROVISIONING_FAILED", "pods failed")

    with pytest.raises(UserError) as caught:
        rig.create_resource()

    (resource,) = rig.control.state()["model_resources"]
    message = str(caught.value)
    assert message.startswith(f"creating model resource ({resource['id']}):")
    assert "MODEL_RESOURCES_ERROR_CODE_PROVISIONING_FAILED" in message and "pods failed" in message
    assert len(rig.posts(f"/model-resources/{resource['id']}/stop")) == 1


def test_create_timeout_stops_the_resource(rig):
    rig.control.configure(timings={"resource_pending": 60})

    with pytest.raises(UserError) as caught:
        rig.create_resource(create_timeout=0.2)

    (resource,) = rig.control.state()["model_resources"]
    assert resource["id"] in str(caught.value)
    assert "timed out" in str(caught.value) and "PENDING" in str(caught.value)
    assert resource["status"] in STOPPED_OR_STOPPING


def test_missing_key_fails_create_naming_both_ways_to_set_it(rig, fresh_provider_state):
    configure(rig.resources, {"together:baseUrl": rig.emulator.base_url})

    with pytest.raises(UserError) as caught:
        rig.resources.create({"base_model": MODEL})

    message = str(caught.value)
    assert "pulumi config set --secret together:apiKey" in message and "TOGETHER_API_KEY" in message
    assert rig.control.requests() == []


def test_delete_with_attached_sessions_needs_force(rig):
    created = rig.create_resource()
    session = rig.client.create_training_session(TrainingSessionCreateRequest(model_resources_id=created.id))

    with pytest.raises(UserError) as caught:
        rig.resources.delete(created.id, created.outs)

    message = str(caught.value)
    assert session.id in message and "force_stop=True" in message
    # An untracked session: the message says so and names the orphan finder.
    assert "that this stack does not manage are attached" in message
    assert "python -m pulumi_together_rl orphans" in message and "--stop" in message
    # Pulumi deletes with the OLD inputs: force_stop=True must be deployed on its own before the change.
    assert "last deployed with" in message and "pulumi up --target" in message
    assert "then apply your change, or run `pulumi destroy`, again" in message
    assert _emulated(rig, created.id)["status"] == "MODEL_RESOURCES_STATUS_READY"


def test_delete_with_force_stop_stops_attached_sessions_and_logs_them(rig, capsys):
    created = rig.create_resource(force_stop=True)
    session = rig.client.create_training_session(TrainingSessionCreateRequest(model_resources_id=created.id))
    ended = rig.client.create_training_session(TrainingSessionCreateRequest(model_resources_id=created.id))
    rig.client.stop_training_session(ended.id)

    rig.resources.delete(created.id, created.outs)

    assert _emulated(rig, created.id)["status"] in STOPPED_OR_STOPPING
    assert rig.client.get_training_session(session.id).status.short in {"STOPPING", "STOPPED"}
    err = capsys.readouterr().err
    # Only the sessions the forced stop really ended (CREATING/RUNNING) are named.
    assert f"also stopped training sessions {session.id}\n" in err and ended.id not in err


def test_delete_with_force_stop_says_when_listing_the_sessions_failed(rig, capsys):
    created = rig.create_resource(force_stop=True)
    rig.client.create_training_session(TrainingSessionCreateRequest(model_resources_id=created.id))
    rig.control.add_fault(method="GET", path=r"/v1/rl/training-sessions$", status=403, times=5)

    rig.resources.delete(created.id, created.outs)

    assert _emulated(rig, created.id)["status"] in STOPPED_OR_STOPPING
    assert "listing its training sessions failed" in capsys.readouterr().err


def test_delete_of_a_stopped_resource_whose_stop_is_refused_succeeds(rig, capsys):
    created = rig.create_resource()
    rig.client.stop_model_resource(created.id)
    # The API's answer to stopping a stopped resource is undocumented: a 409 must not fail the destroy.
    rig.control.add_fault(method="POST", path=rf"/model-resources/{created.id}/stop$", status=409, times=1)

    rig.resources.delete(created.id, created.outs)

    assert "already STOP" in capsys.readouterr().err


def test_delete_of_a_live_resource_whose_stop_is_refused_reports_the_refusal(rig):
    created = rig.create_resource()
    rig.control.add_fault(
        method="POST", path=rf"/model-resources/{created.id}/stop$", status=409, message="busy", times=1
    )

    with pytest.raises(UserError) as caught:
        rig.resources.delete(created.id, created.outs)

    assert "HTTP 409: busy" in str(caught.value) and caught.value.todo
    assert _emulated(rig, created.id)["status"] == "MODEL_RESOURCES_STATUS_READY"


def test_delete_of_a_stopped_or_unknown_resource_succeeds(rig):
    created = rig.create_resource()
    rig.resources.delete(created.id, created.outs)
    rig.resources.delete(created.id, created.outs)  # already stopped
    rig.resources.delete("no-such-resource", {})  # 404
    assert _emulated(rig, created.id)["status"] in STOPPED_OR_STOPPING


def test_refresh_after_an_out_of_band_stop_reports_it_gone(rig):
    created = rig.create_resource()
    rig.client.stop_model_resource(created.id)

    result = rig.resources.read(created.id, created.outs)

    assert result.id == ""


def test_refresh_after_inactivity_expiry_reports_it_gone(rig):
    created = rig.create_resource(inactive_timeout=300)
    rig.control.advance(301)

    result = rig.resources.read(created.id, created.outs)

    assert result.id == ""
    assert _emulated(rig, created.id)["status"] in STOPPED_OR_STOPPING


def test_refresh_of_a_live_resource_keeps_declared_inputs_and_invents_no_diff(rig):
    checked = rig.resources.check(
        {}, {"base_model": MODEL, "base_weights_ref": "together://ml_abc", "owner": OWNER + "gpu"}
    )
    created = rig.resources.create(checked.inputs)

    result = rig.resources.read(created.id, created.outs)

    assert result.id == created.id
    assert result.inputs == checked.inputs
    assert result.outs["effective_base_weights_ref"].startswith("together://ml_abc@rv_")
    assert rig.resources.diff(created.id, result.outs, checked.inputs).changes is False


def test_a_refresh_after_sessions_moved_the_expiry_by_a_fraction_of_a_second_shows_no_change(rig):
    """A session created right after its resource is activity: the API moves the resource's expires_at to that
    moment plus inactive_timeout, some milliseconds later than the create recorded. No change to show; a move of
    seconds (activity later on) is recorded."""
    created = rig.create_resource()
    rig.create_session(created.id)
    moved = rig.client.get_model_resource(created.id).expires_at
    assert moved.isoformat().replace("+00:00", "Z") != created.outs["expires_at"]  # the API's value moved

    process.clear_lookups()
    result = rig.resources.read(created.id, created.outs)

    assert result.outs == created.outs

    rig.control.advance(5)
    rig.create_session(created.id)
    process.clear_lookups()
    later = rig.resources.read(created.id, result.outs)
    assert later.outs["expires_at"] != created.outs["expires_at"]


def test_refresh_of_outputs_an_earlier_release_wrote_keeps_the_stored_inputs(rig):
    # Before `owner` and the estimated price, a state's outputs held only the declared inputs: rebuilt from them,
    # the inputs would lose what check adds now, and the next preview would ask for the price again.
    created = rig.create_resource()
    earlier = {k: v for k, v in created.outs.items() if k not in ("owner", "price_per_hour", "currency")}

    result = rig.resources.read(created.id, earlier)

    assert result.id == created.id and result.outs["status"] == "READY"
    assert result.inputs is None  # the engine keeps the stored inputs


def test_get_takes_the_inputs_from_the_api(rig):
    created = rig.create_resource(compute_config={"num_generator_replicas": 1})

    result = rig.resources.read(created.id, {"__provider": "blob"})  # `.get()`: only the provider is known

    assert result.inputs["base_model"] == MODEL
    assert result.inputs["compute_config"] == {"num_generator_replicas": 1, "gpu_type": "B200-SXM"}
    assert result.inputs["lora_enabled"] is True
    assert result.outs["status"] == "READY"


@pytest.mark.parametrize("ident", ["mr-nope", "mr\x1b[31mred\x07", "a/b", ".."])
def test_get_of_an_id_that_is_not_there_is_one_sentence_naming_the_id(rig, ident):
    """`pulumi import` and `.get()` (a read with nothing declared) of an id that does not exist, or cannot: an
    error naming the id (control characters escaped) and what to do; never a bug, never a read of nothing."""
    with pytest.raises(UserError) as caught:
        rig.resources.read(ident, {"__provider": "blob"})

    message = str(caught.value)
    assert message.startswith(f"reading model resource ({printable(ident)}): ")
    assert "Check the id given to `pulumi import` or `.get()`" in message
    assert "\x1b" not in message and "\x07" not in message and "bug" not in message
    assert not is_bug(caught.value.__cause__)


def test_get_of_an_ended_resource_says_it_has_ended(rig):
    created = rig.create_resource()
    rig.client.stop_model_resource(created.id)

    with pytest.raises(UserError, match=r"it is STOPP(ING|ED): it has ended\. Check the id"):
        rig.resources.read(created.id, {})


def test_update_of_provider_options_only_makes_no_api_call(rig):
    created = rig.create_resource()
    rig.control.clear_requests()
    news = {**{k: created.outs[k] for k in ("base_model",)}, "create_timeout": 10, "force_stop": True}

    diff = rig.resources.diff(created.id, created.outs, news)
    updated = rig.resources.update(created.id, created.outs, news)

    assert diff.changes is True and diff.replaces == []
    assert updated.outs["force_stop"] is True and updated.outs["status"] == "READY"
    assert rig.control.requests() == []


def test_adopt_takes_over_an_existing_resource_without_creating_one(rig):
    existing = rig.client.create_model_resource(ModelResourceCreateRequest(base_model=MODEL))
    rig.control.clear_requests()

    adopted = rig.create_resource(adopt_id=existing.id)

    assert adopted.id == existing.id
    assert adopted.outs["status"] == "READY" and adopted.outs["adopt_id"] == existing.id
    assert rig.posts("/model-resources") == []


def test_adopt_with_mismatched_inputs_names_the_fields_and_stops_nothing(rig):
    existing = rig.client.create_model_resource(
        ModelResourceCreateRequest(base_model=MODEL, inactive_timeout=900)
    )

    declared = {"base_model": MODEL, "adopt_id": existing.id, "inactive_timeout": 1200, "lora_enabled": False}
    # At preview: a check failure on adopt_id that names the fields, not their values.
    failures = rig.resources.check({}, declared).failures
    assert [f.property for f in failures] == ["adopt_id"]
    assert "inactive_timeout and lora_enabled differ." in failures[0].reason or (
        "lora_enabled and inactive_timeout differ." in failures[0].reason
    )
    assert "1200" not in failures[0].reason and MODEL not in failures[0].reason
    # At create (a preview that could not ask the API): the same refusal, with the values.
    with pytest.raises(UserError) as caught:
        rig.resources.create(declared)

    message = str(caught.value)
    assert message.startswith(f"adopting model resource ({existing.id})")
    assert "inactive_timeout" in message and "lora_enabled" in message and "base_model" not in message
    assert _emulated(rig, existing.id)["status"] != "MODEL_RESOURCES_STATUS_STOPPED"
    assert rig.posts("/stop") == []


def test_adopt_of_a_stopped_resource_fails(rig):
    existing = rig.client.create_model_resource(ModelResourceCreateRequest(base_model=MODEL))
    rig.client.stop_model_resource(existing.id)

    declared = {"base_model": MODEL, "adopt_id": existing.id}
    failures = rig.resources.check({}, declared).failures
    assert [(f.property, "is STOP" in f.reason) for f in failures] == [("adopt_id", True)]
    with pytest.raises(UserError, match="is STOP"):  # at create too, if preview could not ask
        rig.resources.create(declared)


def test_an_interrupt_while_waiting_stops_the_resource_and_propagates(rig, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(lifecycle, "_wait_target", interrupted)

    with pytest.raises(KeyboardInterrupt):
        rig.create_resource()

    (resource,) = rig.control.state()["model_resources"]
    assert resource["status"] in STOPPED_OR_STOPPING


# ----------------------------------------------------------------------------- read-after-write lag, abandon


def _live(rig):
    return [r for r in rig.control.state()["model_resources"] if r["status"] not in _GONE]


_GONE = {"MODEL_RESOURCES_STATUS_STOPPING", "MODEL_RESOURCES_STATUS_STOPPED", "MODEL_RESOURCES_STATUS_ERROR"}
_GET_ONE = r"/v1/rl/model-resources/[^/]+$"
_STOP = r"/v1/rl/model-resources/[^/]+/stop$"


@pytest.fixture
def quick_abandon(monkeypatch):

    monkeypatch.setattr(lifecycle, "NOT_FOUND_GRACE", 0.1)
    monkeypatch.setattr(stopping, "RETRY_404_DELAYS", (0.01, 0.01))


def test_a_404_just_after_the_post_is_read_after_write_lag_not_a_failure(rig):
    rig.control.configure(list_lag=3600)  # lists never show it: the watcher asks by GET
    rig.control.add_fault(method="GET", path=_GET_ONE, status=404, times=2)

    created = rig.create_resource()

    assert created.outs["status"] == "READY"
    assert [r["id"] for r in _live(rig)] == [created.id]  # recorded in the state, not leaked


def test_a_lasting_404_after_the_post_stops_the_resource_retrying_a_stop_that_404s(rig, quick_abandon):
    rig.control.configure(list_lag=3600)  # lists never show it: the watcher asks by GET
    rig.control.add_fault(method="GET", path=_GET_ONE, status=404, times=1000)
    rig.control.add_fault(method="POST", path=_STOP, status=404, times=1)

    with pytest.raises(UserError) as caught:
        rig.create_resource()

    (resource,) = rig.control.state()["model_resources"]
    assert resource["status"] in STOPPED_OR_STOPPING  # the second stop went through
    assert "It has been stopped: nothing is left billing" in str(caught.value)


def test_a_stop_that_keeps_answering_404_says_the_resource_may_still_exist(rig, quick_abandon):
    rig.control.configure(list_lag=3600)  # lists never show it: the watcher asks by GET
    rig.control.add_fault(method="GET", path=_GET_ONE, status=404, times=1000)
    rig.control.add_fault(method="POST", path=_STOP, status=404, times=1000)

    with pytest.raises(UserError) as caught:
        rig.create_resource()

    (resource,) = rig.control.state()["model_resources"]
    message = str(caught.value)
    assert len(rig.posts(f"/model-resources/{resource['id']}/stop")) == 3  # the stop was retried
    assert message.startswith(f"creating model resource ({resource['id']}):")
    assert "may still exist" in message and "no longer exists" not in message
    assert f"GET /v1/rl/model-resources/{resource['id']}" in message


def test_a_failed_create_whose_stop_is_refused_for_an_errored_resource_counts_as_stopped(rig):
    rig.control.fail_next("model_resource", "MODEL_RESOURCES_ERROR_CODE_PROVISIONING_FAILED", "pods failed")
    rig.control.add_fault(method="POST", path=_STOP, status=409, times=1)

    with pytest.raises(UserError) as caught:
        rig.create_resource()

    message = str(caught.value)
    assert "It is already ERROR: nothing is left billing" in message
    assert "pods failed" in message and "Fix the cause the API's error gives" in message


# ------------------------------------------------------------------------------------------- check, config


def test_check_of_unchanged_inputs_makes_no_http_even_in_a_fresh_process(rig):
    olds = rig.resources.check(
        {}, {"base_model": MODEL, "compute_config": {"num_generator_replicas": 1}}
    ).inputs
    process.clear_caches()  # a new provider process: nothing cached
    rig.control.clear_requests()

    again = rig.resources.check({**olds, "__provider": "blob"}, {**olds, "create_timeout": 60.0})

    assert again.failures == [] and rig.control.requests() == []
    changed = rig.resources.check(olds, {**olds, "compute_config": {"num_generator_replicas": 2}})
    assert changed.failures == [] and [r["path"] for r in rig.control.requests()] == [
        "/v1/rl/supported-models",
        "/v1/rl/model-resources/estimate-cost",
    ]
    # The price checked last time is carried over, without asking again.
    assert again.inputs["price_per_hour"] == olds["price_per_hour"] > 0 and again.inputs["currency"] == "USD"


def test_the_quick_check_client_has_short_timeouts(rig):
    client = process.api_client("checking", "model resource", "x", quick=True)

    assert client._transport.timeout.read <= 5 and client._transport.max_retry_after <= 2
    assert client._transport.max_attempts == 2


def test_an_unreachable_api_at_check_is_remembered_so_a_preview_pays_it_once(rig, capsys):
    # Only a host that cannot be reached is remembered (a 5xx skips just the check that met it).
    rig.control.add_fault(method="GET", path=r"/supported-models$", drop_connection=True, times=100)

    for _ in range(3):  # three ModelResources in one preview
        assert rig.resources.check({}, {"base_model": MODEL}).failures == []

    assert len([r for r in rig.control.requests() if r["path"] == "/v1/rl/supported-models"]) == 2
    assert capsys.readouterr().err.count("Skipped the remote checks") == 3  # each resource still warns


def test_a_malformed_base_url_from_the_environment_is_blamed_on_the_environment(
    rig, fresh_provider_state, monkeypatch
):
    configure(rig.resources, {"together:apiKey": "k"})
    monkeypatch.setenv("TOGETHER_BASE_URL", "api.together.ai")

    with pytest.raises(UserError) as caught:
        rig.resources.create({"base_model": MODEL})
    message = str(caught.value)
    assert "comes from the environment variable TOGETHER_BASE_URL" in message
    assert "stack config" not in message


def test_a_rejected_key_names_the_setting_it_came_from(rig, fresh_provider_state, monkeypatch):
    rig.control.configure(api_key=rig.emulator.api_key)  # the emulator checks the key from here on
    configure(rig.resources, {"together:baseUrl": rig.emulator.base_url})
    monkeypatch.setenv("TOGETHER_API_KEY", "wrong-key")
    with pytest.raises(UserError) as from_env:
        rig.create_resource()
    assert "HTTP 401" in str(from_env.value)
    assert "comes from the environment variable TOGETHER_API_KEY" in str(from_env.value)

    configure(rig.resources, {"together:baseUrl": rig.emulator.base_url, "together:apiKey": "wrong-key"})
    with pytest.raises(UserError) as from_config:
        rig.create_resource()
    assert "comes from the stack config together:apiKey" in str(from_config.value)
    assert "wrong-key" not in str(from_env.value) + str(from_config.value)


def test_a_malformed_base_url_is_a_provider_error_naming_the_setting(rig, fresh_provider_state, capsys):
    configure(rig.resources, {"together:apiKey": "k", "together:baseUrl": "api.together.ai"})

    with pytest.raises(UserError) as caught:
        rig.resources.create({"base_model": MODEL})
    message = str(caught.value)
    assert message.startswith(f"creating model resource ({MODEL}): ")
    assert "comes from the stack config together:baseUrl" in message and "TOGETHER_BASE_URL" not in message
    assert "(from the stack config together:baseUrl)" in message and "argument" not in message

    with pytest.raises(UserError, match=r"^deleting model resource \(mr-1\): "):
        rig.resources.delete("mr-1", {})

    assert rig.resources.check({}, {"base_model": MODEL}).failures == []  # preview: warns, skips
    assert "warning" in capsys.readouterr().err


def test_a_malformed_base_url_from_the_environment_names_the_variable(rig, fresh_provider_state, monkeypatch):
    configure(rig.resources, {"together:apiKey": "k"})
    monkeypatch.setenv("TOGETHER_BASE_URL", "api.together.ai")

    with pytest.raises(UserError) as caught:
        rig.resources.create({"base_model": MODEL})

    message = str(caught.value)
    assert "(from the environment variable TOGETHER_BASE_URL)" in message and "argument" not in message


# ---------------------------------------------------------------------------------------------------- adopt


def test_adopt_compares_the_optimizer_kind_not_the_exact_settings(rig):
    muon = {"muon": {"scaling_strategy": "MUON_SCALING_STRATEGY_ORIGINAL"}}
    existing = rig.client.create_model_resource(
        ModelResourceCreateRequest(base_model=MODEL, optimizer_config=muon)
    )
    plain = rig.client.create_model_resource(ModelResourceCreateRequest(base_model=MODEL))

    assert rig.create_resource(adopt_id=existing.id, optimizer_config={"muon": {}}).id == existing.id
    assert rig.create_resource(adopt_id=plain.id, optimizer_config={"adam": {}}).id == plain.id
    strategy = {"muon": {"scaling_strategy": "MUON_SCALING_STRATEGY_MATCH_ADAM"}}
    for adopt_id, optimizer, field in (
        (existing.id, strategy, "optimizer_config.muon.scaling_strategy"),
        (plain.id, {"muon": {}}, "optimizer_config"),
    ):
        declared = {"base_model": MODEL, "adopt_id": adopt_id, "optimizer_config": optimizer}
        (failure,) = rig.resources.check({}, declared).failures
        assert failure.property == "adopt_id" and f"settings: {field} differs." in failure.reason
        with pytest.raises(UserError, match=field.replace(".", r"\.")):
            rig.resources.create(declared)


def test_an_adopt_that_times_out_says_what_to_do(rig):
    rig.control.configure(timings={"resource_pending": 60})
    existing = rig.client.create_model_resource(ModelResourceCreateRequest(base_model=MODEL))

    with pytest.raises(UserError) as caught:
        rig.create_resource(adopt_id=existing.id, create_timeout=0.2)

    assert str(caught.value).startswith(f"adopting model resource ({existing.id}): timed out")
    assert "raise create_timeout" in caught.value.todo
    assert rig.posts("/stop") == []  # never ours to stop
