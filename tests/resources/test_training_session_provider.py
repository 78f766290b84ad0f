"""The TrainingSession provider's methods, called directly, against the emulator over loopback HTTP."""

from __future__ import annotations

import pytest

from pulumi_together_rl.client.models import (
    ModelResourceCreateRequest,
    SessionMetadata,
    TrainingSessionCreateRequest,
    TrainingSessionUpdateRequest,
)
from pulumi_together_rl.messages import UserError
from pulumi_together_rl.resources import process

from .conftest import OWNER


@pytest.fixture
def resource_id(rig) -> str:
    return rig.create_resource().id


def _emulated(rig, id_):
    return next(s for s in rig.control.state()["training_sessions"] if s["id"] == id_)


def test_create_waits_until_running_with_api_defaults_in_effective_outputs(rig, resource_id, capsys):
    rig.control.configure(timings={"session_creating": 0.1})

    created = rig.create_session(
        resource_id, lora_config={"rank": 16.0}, display_name="gsm8k-2", metadata={"wandb": {"project": "p"}}
    )

    outs = created.outs
    assert outs["status"] == "RUNNING"
    assert outs["lora_config"] == {"rank": 16}
    assert outs["effective_lora_config"] == {"rank": 16, "alpha": 64, "dropout": 0.0, "train_unembed": True}
    assert outs["base_model"] == "Qwen/Qwen3.5-4B" and outs["step"] == 0
    assert _emulated(rig, created.id)["display_name"] == "gsm8k-2"
    assert f"training session {created.id[:8]}… (gsm8k-2): CREATING" in capsys.readouterr().err


def test_error_during_create_stops_the_session_and_reports_the_api_error(rig, resource_id):
    rig.control.fail_next("training_session", "TRAINING_SESSION_ERROR_CODE_SESSION_FAILED", "trainer crashed")

    with pytest.raises(UserError) as caught:
        rig.create_session(resource_id, display_name="doomed")

    (session,) = rig.control.state()["training_sessions"]
    message = str(caught.value)
    assert message.startswith(f"creating training session ({session['id']}):")
    assert "TRAINING_SESSION_ERROR_CODE_SESSION_FAILED" in message and "trainer crashed" in message
    assert len(rig.posts(f"/training-sessions/{session['id']}/stop")) == 1


def test_create_timeout_stops_the_session(rig, resource_id):
    rig.control.configure(timings={"session_creating": 60})

    with pytest.raises(UserError) as caught:
        rig.create_session(resource_id, create_timeout=0.2)

    (session,) = rig.control.state()["training_sessions"]
    assert session["id"] in str(caught.value) and "timed out" in str(caught.value)
    assert session["status"] in {"TRAINING_SESSION_STATUS_STOPPING", "TRAINING_SESSION_STATUS_STOPPED"}


def test_create_on_a_full_weight_resource_with_lora_config_fails_in_check(rig):
    full = rig.create_resource(lora_enabled=False)

    result = rig.sessions.check({}, {"model_resources_id": full.id, "lora_config": {"rank": 8}})

    assert [f.property for f in result.failures] == ["lora_config"]


def test_check_rejects_a_rank_above_the_models_max_rank(rig):
    resource = rig.client.create_model_resource(ModelResourceCreateRequest(base_model="Qwen/Qwen3.5-35B-A3B"))

    result = rig.sessions.check({}, {"model_resources_id": resource.id, "lora_config": {"rank": 64}})

    assert [f.property for f in result.failures] == ["lora_config.rank"]
    assert "at most 32" in result.failures[0].reason


def test_update_patches_the_display_name_in_place(rig, resource_id):
    created = rig.create_session(resource_id, display_name="old", metadata={"wandb": {"project": "p"}})
    news = {**created.outs, "display_name": "new"}
    news = {k: news[k] for k in ("model_resources_id", "display_name", "metadata")}

    diff = rig.sessions.diff(created.id, created.outs, news)
    updated = rig.sessions.update(created.id, created.outs, news)

    assert diff.changes is True and diff.replaces == []
    assert updated.outs["display_name"] == "new" and updated.outs["status"] == "RUNNING"
    live = _emulated(rig, created.id)
    assert live["display_name"] == "new" and live["metadata"]["wandb"]["project"] == "p"
    assert [r["method"] for r in rig.control.requests() if r["path"].endswith(created.id)][-1] == "PATCH"


def test_update_clears_a_removed_display_name_and_wandb_key(rig, resource_id):
    created = rig.create_session(
        resource_id, display_name="named", metadata={"wandb": {"project": "p", "entity": "team"}}
    )
    news = {"model_resources_id": resource_id, "metadata": {"wandb": {"project": "p"}}}

    updated = rig.sessions.update(created.id, created.outs, news)

    live = _emulated(rig, created.id)
    assert not live.get("display_name")
    assert not live["metadata"]["wandb"].get("entity") and live["metadata"]["wandb"]["project"] == "p"
    assert "display_name" not in updated.outs


def test_update_of_timeouts_only_makes_no_api_call(rig, resource_id):
    created = rig.create_session(resource_id, display_name="s")
    rig.control.clear_requests()
    news = {"model_resources_id": resource_id, "display_name": "s", "delete_timeout": 5}

    updated = rig.sessions.update(created.id, created.outs, news)

    assert updated.outs["delete_timeout"] == 5 and updated.outs["status"] == "RUNNING"
    assert rig.control.requests() == []


def test_refresh_after_an_out_of_band_stop_reports_it_gone(rig, resource_id):
    created = rig.create_session(resource_id)
    rig.client.stop_training_session(created.id)

    assert rig.sessions.read(created.id, created.outs).id == ""


def test_refresh_after_the_resource_expired_reports_the_session_gone(rig):
    resource = rig.create_resource(inactive_timeout=300)
    created = rig.create_session(resource.id)
    rig.control.advance(301)

    assert rig.sessions.read(created.id, created.outs).id == ""
    assert _emulated(rig, created.id)["status"] == "TRAINING_SESSION_STATUS_EXPIRED"


def test_refresh_brings_an_out_of_band_rename_into_the_state_so_up_puts_it_back(rig, resource_id):
    checked = rig.sessions.check(
        {}, {"model_resources_id": resource_id, "display_name": "declared", "owner": OWNER + "s"}
    )
    created = rig.sessions.create(checked.inputs)
    rig.client.update_training_session(created.id, TrainingSessionUpdateRequest(display_name="renamed"))

    result = rig.sessions.read(created.id, created.outs)

    assert result.inputs["display_name"] == "renamed"
    diff = rig.sessions.diff(created.id, result.outs, checked.inputs)
    assert diff.changes is True and diff.replaces == []


def test_refresh_of_an_unchanged_session_invents_no_diff(rig, resource_id):
    checked = rig.sessions.check(
        {},
        {
            "model_resources_id": resource_id,
            "display_name": "s",
            "metadata": {"wandb": {"run_id": "r1"}},
            "owner": OWNER + "s",
        },
    )
    created = rig.sessions.create(checked.inputs)

    result = rig.sessions.read(created.id, created.outs)

    assert result.inputs == checked.inputs
    assert rig.sessions.diff(created.id, result.outs, checked.inputs).changes is False


def test_delete_waits_until_the_slot_is_free(rig, resource_id):
    created = rig.create_session(resource_id)
    rig.control.configure(timings={"session_stopping": 0.15})

    rig.sessions.delete(created.id, created.outs)

    assert _emulated(rig, created.id)["status"] == "TRAINING_SESSION_STATUS_STOPPED"
    rig.sessions.delete(created.id, created.outs)  # already stopped: fine
    rig.sessions.delete("no-such-session", {})  # 404: fine


def test_adopt_takes_over_a_session_and_patches_its_name(rig, resource_id):
    existing = rig.client.create_training_session(
        TrainingSessionCreateRequest(
            model_resources_id=resource_id,
            display_name="by-hand",
            metadata=SessionMetadata(wandb={"group": "g"}),
        )
    )
    rig.control.clear_requests()

    adopted = rig.create_session(resource_id, adopt_id=existing.id, display_name="managed")

    assert adopted.id == existing.id and adopted.outs["status"] == "RUNNING"
    live = _emulated(rig, existing.id)
    assert live["display_name"] == "managed" and not live["metadata"].get("wandb", {}).get("group")
    assert rig.posts("/training-sessions") == []


def test_adopt_with_a_different_resource_names_the_field(rig, resource_id):
    other = rig.create_resource().id
    existing = rig.client.create_training_session(TrainingSessionCreateRequest(model_resources_id=other))

    declared = {"model_resources_id": resource_id, "adopt_id": existing.id}
    failures = rig.sessions.check({}, declared).failures
    assert [(f.property, "settings: model_resources_id differs." in f.reason) for f in failures] == [
        ("adopt_id", True)
    ]
    with pytest.raises(UserError, match="model_resources_id"):  # at create too, if preview could not ask
        rig.sessions.create(declared)
    assert _emulated(rig, existing.id)["status"] == "TRAINING_SESSION_STATUS_RUNNING"


def _stop_fault(rig, session_id, status=409):
    rig.control.add_fault(
        method="POST",
        path=rf"/training-sessions/{session_id}/stop$",
        status=status,
        message="refused",
        times=1,
    )


def test_delete_of_a_stopped_session_whose_stop_is_refused_succeeds(rig, resource_id, capsys):
    created = rig.create_session(resource_id, display_name="s")
    rig.client.stop_training_session(created.id)
    _stop_fault(rig, created.id)  # the API's answer to stopping a stopped session is undocumented

    rig.sessions.delete(created.id, created.outs)

    assert "already STOPPED" in capsys.readouterr().err


def test_delete_of_a_stopping_session_whose_stop_is_refused_waits_for_the_slot(rig, resource_id):
    created = rig.create_session(resource_id, display_name="s")
    rig.control.configure(timings={"session_stopping": 0.15})
    rig.client.stop_training_session(created.id)
    _stop_fault(rig, created.id, status=400)

    rig.sessions.delete(created.id, created.outs)

    assert _emulated(rig, created.id)["status"] == "TRAINING_SESSION_STATUS_STOPPED"


def test_delete_of_a_running_session_whose_stop_is_refused_reports_the_refusal(rig, resource_id):
    created = rig.create_session(resource_id, display_name="s")
    _stop_fault(rig, created.id)

    with pytest.raises(UserError, match=r"HTTP 409: refused"):
        rig.sessions.delete(created.id, created.outs)
    assert _emulated(rig, created.id)["status"] == "TRAINING_SESSION_STATUS_RUNNING"


def test_a_failed_session_create_says_the_session_was_stopped_not_that_nothing_bills(rig, resource_id):
    rig.control.fail_next("training_session", "TRAINING_SESSION_ERROR_CODE_SESSION_FAILED", "trainer crashed")

    with pytest.raises(UserError) as caught:
        rig.create_session(resource_id, display_name="doomed")

    message = str(caught.value)
    assert "nothing is left billing" not in message  # the model resource still bills
    assert "It has been stopped: the session is over; its model resource is not affected" in message


def test_a_404_just_after_the_post_does_not_fail_the_session_create(rig, resource_id):
    rig.control.add_fault(method="GET", path=r"/v1/rl/training-sessions/[^/]+$", status=404, times=2)

    created = rig.create_session(resource_id, display_name="s")

    assert created.outs["status"] == "RUNNING"


def test_session_check_of_unchanged_inputs_makes_no_http(rig, resource_id):
    olds = rig.sessions.check({}, {"model_resources_id": resource_id, "lora_config": {"rank": 8}}).inputs
    process.clear_caches()  # a new provider process: nothing cached
    rig.control.clear_requests()

    again = rig.sessions.check(olds, {**olds, "display_name": "renamed"})

    assert again.failures == [] and rig.control.requests() == []
    rig.sessions.check(olds, {**olds, "lora_config": {"rank": 16}})
    assert rig.control.requests() != []


def test_a_refresh_brings_the_training_state_and_the_newest_checkpoints_and_no_diff(rig, resource_id):
    created = rig.create_session(resource_id, lora_config={"rank": 8})
    assert "latest_training_checkpoint_id" not in created.outs
    rig.control.advance_session(created.id, 50)
    early = rig.control.save_checkpoint(created.id, "training")
    rig.control.advance_session(created.id, 50)
    newest = rig.control.save_checkpoint(created.id, "training")
    served = rig.control.save_checkpoint(created.id, "inference")

    read = rig.sessions.read(created.id, created.outs)

    assert read.outs["step"] == 100 and read.outs["policy_state"]["trainer_step"] == 100
    assert [c["id"] for c in read.outs["training_checkpoints"]] == [early["id"], newest["id"]]
    assert (read.outs["latest_training_checkpoint_id"], read.outs["latest_training_checkpoint_step"]) == (
        newest["id"],
        100,
    )
    assert read.outs["latest_inference_checkpoint_id"] == served["id"]
    diff = rig.sessions.diff(created.id, read.outs, read.inputs)
    assert not diff.changes  # a new checkpoint, a new step: never a diff


def _failed_on(rig, resource_id: str, **inputs) -> list[str]:
    checked = rig.sessions.check({}, {"model_resources_id": resource_id, "owner": "o/p/s/n", **inputs})
    return [f.property for f in checked.failures]


def test_a_resume_is_checked_at_preview_against_the_checkpoint_itself(rig, resource_id):
    source = rig.create_session(resource_id, lora_config={"rank": 8})
    rig.control.advance_session(source.id, 10)
    trained = rig.control.save_checkpoint(source.id, "training")
    served = rig.control.save_checkpoint(source.id, "inference")
    other_model = rig.create_resource(base_model="Qwen/Qwen3.5-35B-A3B").id

    ok = rig.sessions.check({}, {"model_resources_id": resource_id, "owner": "o/p/s/n", "lora_config": {"rank": 8},
                                 "resume_from_checkpoint_id": trained["id"], "load_optimizer": True})  # fmt: skip
    assert ok.failures == []
    assert _failed_on(rig, resource_id, resume_from_checkpoint_id="ckpt-missing") == [
        "resume_from_checkpoint_id"
    ]
    assert _failed_on(rig, resource_id, resume_from_checkpoint_id=served["id"], load_optimizer=True) == [
        "load_optimizer"
    ]
    assert _failed_on(rig, resource_id, resume_from_checkpoint_id=served["id"], load_optimizer=False) == []
    assert (
        _failed_on(rig, resource_id, resume_from_checkpoint_id=served["id"]) == []
    )  # unset: no optimizer asked
    assert _failed_on(rig, other_model, resume_from_checkpoint_id=trained["id"]) == [
        "resume_from_checkpoint_id"
    ]
    assert _failed_on(
        rig, resource_id, resume_from_checkpoint_id=trained["id"], lora_config={"rank": 16}
    ) == ["lora_config.rank"]
    assert _failed_on(  # smaller than the adapter's rank does not fit either
        rig, resource_id, resume_from_checkpoint_id=trained["id"], lora_config={"rank": 4}
    ) == ["lora_config.rank"]
    reason = rig.sessions.check({}, {"model_resources_id": other_model, "owner": "o/p/s/n",
                                     "resume_from_checkpoint_id": trained["id"]}).failures[0].reason  # fmt: skip
    assert "was trained from Qwen/Qwen3.5-4B" in reason and "runs Qwen/Qwen3.5-35B-A3B" in reason
