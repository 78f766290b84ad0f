"""Inputs that arrived secret (``secret_inputs``, set by either face) never reach a line, a failure or the create
journal: shown as ``[secret]``, whole or by the first characters an id is quoted by."""

from __future__ import annotations

import json

import pytest
from harness.journals import entries

from pulumi_together_rl import messages
from pulumi_together_rl.messages import UserError

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
