"""Inputs that arrived secret (``secret_inputs``, set by either face) never reach a line, a failure or the create
journal: shown as ``[secret]``, whole or by the first characters an id is quoted by."""

from __future__ import annotations

import json

import pytest
from harness.journals import entries

from pulumi_together_rl import messages
from pulumi_together_rl.messages import UserError
from pulumi_together_rl.resources import secrecy

from .conftest import OWNER


def test_hide_masks_whole_values_and_the_beginnings_ids_are_quoted_by():
    with messages.hiding(["mr-0123456789abcdef", "abc"]):
        assert messages.hide("adopting mr-0123456789abcdef now") == "adopting [secret] now"
        assert messages.hide("model resource mr-01234… is STOPPED") == "model resource [secret]… is STOPPED"
        assert messages.hide("abc is too short to hide") == "abc is too short to hide"
    assert messages.hide("mr-0123456789abcdef") == "mr-0123456789abcdef"  # only inside the context


def test_a_secret_adopt_id_is_never_quoted_by_check(rig, capsys):
    secret_id = "mr-does-not-exist-0123456789"
    checked = rig.resources.check(
        {},
        {
            "base_model": "Qwen/Qwen3.5-4B",
            "adopt_id": secret_id,
            "owner": OWNER + "gpu",
            "secret_inputs": ["adopt_id"],
        },
    )
    [failure] = checked.failures
    assert failure.property == "adopt_id" and "[secret]" in failure.reason
    assert secret_id[:8] not in failure.reason + capsys.readouterr().err


def test_a_failed_create_with_a_secret_display_name_says_secret_everywhere(rig, capsys):
    resource_id = rig.create_resource().id
    name = "customer-acme-churn-eval"
    rig.control.add_fault(method="POST", path="/v1/rl/training-sessions$", status=400, times=1)
    with pytest.raises(UserError) as failed:
        rig.create_session(resource_id, display_name=name, secret_inputs=["display_name"])
    assert str(failed.value).startswith("creating training session ([secret]):")

    created = rig.create_session(
        resource_id,
        display_name=name,
        metadata={"wandb": {"run_name": name}},
        secret_inputs=["display_name", "metadata"],
    )
    assert created.outs["display_name"] == name  # the state holds it (the engine keeps it secret there)
    assert name not in str(failed.value) + capsys.readouterr().err
    written = [
        json.loads(e.journal.store.read(e.key).data) for e in entries() if e.entry.kind == "training session"
    ]
    assert written and all(w["body"]["display_name"] == "[secret]" for w in written)
    assert all(w["body"].get("metadata") in (None, "[secret]") for w in written)
    assert name not in json.dumps(written)


def test_strings_nested_in_a_secret_input_are_hidden_at_any_depth():
    """A map input that holds a secret is secret as a whole (both faces mark it so): every string inside it, in
    nested maps and in lists, is hidden from lines and sentences."""
    props = {
        "metadata": {"wandb": {"run_name": "acme-churn-run-7"}, "tags": ["public", "acme-tag-secret"]},
        "display_name": "trial",
        "secret_inputs": ["metadata"],
    }
    with secrecy.hidden(props):
        line = messages.hide("run acme-churn-run-7 tagged acme-tag-secret of trial")
    assert line == "run [secret] tagged [secret] of trial"


def test_a_secret_nested_in_metadata_is_never_printed_nor_journaled(rig, capsys):
    """A Pulumi secret inside the metadata map (the program's ``secret_inputs`` names the map): the API's errors
    that quote it, through a failed create and a failed update, and the create journal show ``[secret]``."""
    resource_id = rig.create_resource().id
    run, renamed = "acme-churn-eval-run-0451", "acme-churn-eval-run-0452"
    metadata = {"wandb": {"project": "evals", "run_name": run}}
    already = f"W&B run {run} is already attached to another session"
    rig.control.add_fault(
        method="POST", path="/v1/rl/training-sessions$", status=400, times=1, message=already
    )
    with pytest.raises(UserError) as failed_create:
        rig.create_session(resource_id, display_name="trial", metadata=metadata, secret_inputs=["metadata"])
    assert "W&B run [secret] is already attached" in str(failed_create.value)

    created = rig.create_session(
        resource_id, display_name="trial", metadata=metadata, secret_inputs=["metadata"]
    )
    news = {
        "model_resources_id": resource_id,
        "display_name": "trial",
        "metadata": {"wandb": {"project": "evals", "run_name": renamed}},
        "secret_inputs": ["metadata"],
    }
    missing = f"W&B run {renamed} does not exist in project evals"
    rig.control.add_fault(
        method="PATCH", path="/v1/rl/training-sessions/", status=400, times=1, message=missing
    )
    with pytest.raises(UserError) as failed_update:
        rig.sessions.update(created.id, created.outs, news)
    assert "W&B run [secret] does not exist" in str(failed_update.value)

    said = str(failed_create.value) + str(failed_update.value) + capsys.readouterr().err
    written = [
        json.loads(e.journal.store.read(e.key).data) for e in entries() if e.entry.kind == "training session"
    ]
    assert written and all(w["body"]["metadata"] == "[secret]" for w in written)
    for value in (run, renamed):
        assert value[:8] not in said  # not whole, nor by the first characters an id is quoted by
        assert value not in json.dumps(written)


def test_a_secret_in_a_list_inside_metadata_is_never_quoted_by_check(rig, capsys):
    token = "wandb-key-0123456789abcdef"
    checked = rig.sessions.check(
        {},
        {
            "model_resources_id": rig.create_resource().id,
            "metadata": {"wandb": {"project": "evals", "tags": ["nightly", token]}},
            "owner": OWNER + "trial",
            "secret_inputs": ["metadata"],
        },
    )
    assert [f.property for f in checked.failures] == ["metadata.wandb.tags"]
    assert token[:8] not in " ".join(f.reason for f in checked.failures) + capsys.readouterr().err
