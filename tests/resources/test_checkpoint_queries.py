"""Checkpoints as data: the core's query (:mod:`pulumi_together_rl.resources.checkpoints`) against the emulator,
and the dynamic face's ``get_checkpoints`` / ``latest_checkpoint`` in a program, with the stack config as the
program sees it."""

from __future__ import annotations

from pathlib import Path

import pulumi
import pytest
from harness.mocks import run_main

from pulumi_together_rl.messages import UserError
from pulumi_together_rl.resources import checkpoints

PROGRAM = Path(__file__).resolve().parents[1] / "program" / "checkpoint_query"


class NoResources(pulumi.runtime.Mocks):
    """The program declares nothing: only its functions run."""

    def new_resource(self, args):
        raise AssertionError(f"unexpected resource {args.name}")

    def call(self, args):
        raise AssertionError(f"unexpected invoke {args.token}")


@pytest.fixture
def trained(rig):
    """A running session that saved training checkpoints at steps 10 and 50 and an inference one at 60."""
    resource = rig.create_resource()
    session = rig.create_session(resource.id, lora_config={"rank": 8})
    saved = {}
    for steps, kind in ((10, "training"), (40, "training"), (10, "inference")):
        rig.control.advance_session(session.id, steps)
        saved[kind, len(saved)] = rig.control.save_checkpoint(session.id, kind)
    ids = [c["id"] for c in saved.values()]
    return session.id, ids  # [training@10, training@50, inference@60]


def test_find_lists_a_sessions_checkpoints_of_a_type_newest_first(rig, trained):
    session, (early, late, served) = trained

    found = checkpoints.find({"session_id": session, "type": "training"})

    assert [(c["id"], c["step"]) for c in found] == [(late, 50), (early, 10)]
    assert found[0]["type"] == "training" and found[0]["session_id"] == session and found[0]["lora_rank"] == 8
    assert found[0]["base_model"] == "Qwen/Qwen3.5-4B" and found[0]["created_at"].endswith("Z")
    assert [c["id"] for c in checkpoints.find({"session_id": session, "type": "inference"})] == [served]
    assert checkpoints.find({"session_id": session, "min_step": 51}) == []
    assert [c["id"] for c in checkpoints.find({"base_model": "Qwen/Qwen3.5-4B", "min_step": 20})] == [late]


def test_latest_is_the_newest_at_or_after_the_step_and_none_is_an_error(rig, trained):
    session, (_, late, _) = trained

    assert checkpoints.latest({"session_id": session, "type": "training"})["id"] == late
    assert checkpoints.latest({"session_id": session, "min_step": 50})["id"] == late
    with pytest.raises(UserError) as caught:
        checkpoints.latest({"session_id": session, "type": "training", "min_step": 51})
    assert str(caught.value).startswith(
        f"finding the latest checkpoint: no training checkpoint of session {session} at step 51 or later exists."
    )


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"session_id": "s", "type": "weights"}, "type"),
        ({"session_id": "s", "min_step": -1}, "min_step"),
        ({"session_id": "s", "min_step": 1.5}, "min_step"),
        ({"type": "training"}, "session_id"),
        ({"session_id": "s\nforged line"}, "session_id"),
    ],
)
def test_a_bad_query_fails_naming_the_field(query, field):
    _, failures = checkpoints.check(query)
    assert [f.property for f in failures] == [field]


def test_the_functions_answer_a_program_with_its_own_stack_config(rig, trained):
    session, (early, late, served) = trained
    stack_config = {
        "together:apiKey": rig.emulator.api_key,
        "together:baseUrl": rig.emulator.base_url,
        "session": session,
    }

    exports, _ = run_main(PROGRAM, NoResources(), config=stack_config, secret_keys=["together:apiKey"])

    assert [c["id"] for c in exports["all"]] == [late, early]
    assert [c["id"] for c in exports["inference"]] == [served]
    assert exports["latest"]["id"] == late and exports["latest"]["step"] == 50


def test_a_function_that_finds_nothing_fails_the_program_in_one_sentence(rig, trained):
    session, _ = trained
    stack_config = {
        "together:apiKey": rig.emulator.api_key,
        "together:baseUrl": rig.emulator.base_url,
        "session": session,
        "min_step": 1000,
    }

    with pytest.raises(pulumi.RunError) as caught:
        run_main(PROGRAM, NoResources(), config=stack_config)

    assert str(caught.value).startswith(
        f"finding the latest checkpoint: no training checkpoint of session {session}"
    )
