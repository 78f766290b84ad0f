"""The dynamic face's functions: what a program asks the API for, as ``Output`` values.

    from pulumi_together_rl import latest_checkpoint

    start = latest_checkpoint(session_id=run.id, min_step=100)          # Output[Checkpoint]
    TrainingSession("resume", TrainingSessionArgs(model_resource=gpu,
                                                  resume_from_checkpoint_id=start["id"]))

Each runs in the program's process, at preview too once its arguments are known (a session made in the same
change is known at ``up``), with the stack config as the program sees it (``together:apiKey``,
``together:baseUrl``, else the environment). The query is checked like a resource's inputs; a bad field, an
API failure or (for :func:`latest_checkpoint`) no match fails the program with one sentence and no traceback.
The core is :mod:`.checkpoints`; the plugin serves the same two as ``getCheckpoints`` / ``latestCheckpoint``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, TypedDict

import pulumi

from .. import config
from ..messages import UserError
from . import checkpoints


class CheckpointQuery(TypedDict, total=False):
    """Which checkpoints: of a session or a base model (at least one), of a type, from a step on."""

    session_id: pulumi.Input[str]
    """The training session whose checkpoints to list (its ``id``)."""
    base_model: pulumi.Input[str]
    """Only checkpoints of this base model (``"Qwen/Qwen3.5-4B"``)."""
    type: pulumi.Input[str]
    """``"training"`` (the default: a checkpoint a session resumes from) or ``"inference"`` (a model to
    serve)."""
    min_step: pulumi.Input[int]
    """Only checkpoints saved at this step or later (default 0)."""


class Checkpoint(TypedDict):
    """A saved checkpoint, as ``GET /v1/rl/checkpoints`` reports it."""

    id: str
    """Its id: what ``resume_from_checkpoint_id`` takes."""
    type: str
    """``"training"`` or ``"inference"``."""
    session_id: str | None
    """The training session that saved it."""
    base_model: str | None
    """The base model it was trained from."""
    step: int
    """The optimizer step it was saved at."""
    created_at: str | None
    """RFC 3339 time it was saved."""
    lora_rank: int | None
    """Its LoRA rank; unset for a full-weight checkpoint."""


def get_checkpoints(
    session_id: pulumi.Input[str] | None = None,
    base_model: pulumi.Input[str] | None = None,
    type: pulumi.Input[str] | None = "training",
    min_step: pulumi.Input[int] | None = None,
) -> pulumi.Output[list[Checkpoint]]:
    """Every checkpoint that matches (see :class:`CheckpointQuery`), newest first; ``[]`` when none does."""
    query = {"session_id": session_id, "base_model": base_model, "type": type, "min_step": min_step}
    return _answer(checkpoints.find, query)


def latest_checkpoint(
    session_id: pulumi.Input[str] | None = None,
    base_model: pulumi.Input[str] | None = None,
    type: pulumi.Input[str] | None = "training",
    min_step: pulumi.Input[int] | None = None,
) -> pulumi.Output[Checkpoint]:
    """The newest checkpoint that matches (see :class:`CheckpointQuery`): "the newest training checkpoint of
    this session at or after step N". None matching fails the program, naming the query: a resume from "the
    latest" never quietly starts from scratch. To pin a run, export the id and resume from that (see
    ``examples/reproduce``)."""
    query = {"session_id": session_id, "base_model": base_model, "type": type, "min_step": min_step}
    return _answer(checkpoints.latest, query)


def _answer(call: Callable[[Mapping[str, Any]], Any], query: Mapping[str, Any]) -> pulumi.Output[Any]:
    def run(args: Mapping[str, Any]) -> Any:
        checked, failures = checkpoints.check(args)
        if failures:
            (first, *_) = failures
            raise pulumi.RunError(f"checking a checkpoint query: {first.property}: {first.reason}")
        try:
            with config.program_config():
                return call(checked)
        except UserError as exc:
            raise pulumi.RunError(str(exc)) from None  # one sentence, no traceback (pulumi.RunError)

    # The call blocks on HTTP: a thread, so the program's other outputs resolve meanwhile.
    return pulumi.Output.from_input(query).apply(lambda args: asyncio.to_thread(run, args))
