"""Checkpoints as data, for every face: "the checkpoints of this session (or base model), of this type, at or
after step N", newest first (``GET /v1/rl/checkpoints``, every page), and the newest of them.

:func:`find` and :func:`latest` take the query as the faces receive it (core snake_case names), check it as a
resource's inputs are checked (one failure per bad field, naming it), and answer plain dicts (:func:`as_data`),
which the dynamic face wraps in an ``Output`` and the plugin answers as an invoke. A query that matches nothing
is an answer for :func:`find` (``[]``) and a :class:`~..messages.UserError` for :func:`latest`: a program that
resumes from "the latest" must not quietly start from scratch.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Literal

from pydantic import Field

from ..client.models import CheckpointInfo, CheckpointType
from ..messages import UserError, explain
from . import process
from .inputs import Failure, Id, StrictInputs, WholeInt, iso, validate_inputs

TYPES = {"training": CheckpointType.TRAINING, "inference": CheckpointType.INFERENCE}
"""The query's ``type`` -> the API's: a training checkpoint resumes a session, an inference one serves."""


class Query(StrictInputs):
    session_id: Id | None = None
    base_model: Id | None = None
    type: Literal["training", "inference"] | None = "training"
    min_step: WholeInt | None = Field(None, ge=0)


HINTS = {
    "session_id": "Use a training session's id (its `id` output), or leave session_id unset",
    "base_model": 'Use a base model such as "Qwen/Qwen3.5-4B", or leave base_model unset',
    "type": 'Use "training" (a checkpoint to resume from) or "inference" (a model to serve)',
    "min_step": "Use a whole number of steps, 0 or more",
}


def check(args: Mapping[str, Any]) -> tuple[dict[str, Any], list[Failure]]:
    """(the query, one failure per bad field); a query must name a session or a base model."""
    query, failures = validate_inputs(Query, args, required=(), hints=HINTS)
    if not failures and not (query.get("session_id") or query.get("base_model")):
        failures = [Failure("session_id", "a checkpoint query names a session or a base model. Set session_id "
                            "(a training session's id) or base_model")]  # fmt: skip
    return query, failures


def find(query: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every checkpoint that matches the (checked) query, newest first, as :func:`as_data`."""
    return [as_data(c) for c in _matching(query, "listing")]


def latest(query: Mapping[str, Any]) -> dict[str, Any]:
    """The newest checkpoint that matches the (checked) query, as :func:`as_data`; none is an error."""
    for found in _matching(query, "finding"):
        return as_data(found)
    raise UserError("finding", "the latest checkpoint", None, f"no {describe(query)} exists", "Check the query, "
                    "or save a checkpoint first (and run `pulumi refresh` to see it in the session's outputs)")  # fmt: skip


def describe(query: Mapping[str, Any]) -> str:
    """``training checkpoint of session 3f2a… at step 100 or later`` (for messages)."""
    kind = query.get("type") or "training"
    of = [f"session {query['session_id']}"] if query.get("session_id") else []
    of += [f"base model {query['base_model']}"] if query.get("base_model") else []
    step = f" at step {query['min_step']} or later" if query.get("min_step") else ""
    return f"{kind} checkpoint of {' and '.join(of)}{step}"


def as_data(found: CheckpointInfo) -> dict[str, Any]:
    """A checkpoint as a program sees it: its id, ``type`` (``training`` / ``inference``), session, base model,
    step, creation time and LoRA rank (None when full-weight or not reported)."""
    return {
        "id": found.id,
        "type": found.type.short.lower(),
        "session_id": found.session_id,
        "base_model": found.base_model,
        "step": int(found.step),
        "created_at": iso(found.created_at),
        "lora_rank": found.lora_rank,
    }


def _matching(query: Mapping[str, Any], doing: str) -> Iterator[CheckpointInfo]:
    subject = query.get("session_id") or query.get("base_model")
    client = process.api_client(doing, "checkpoints", subject)
    kind = TYPES[query.get("type") or "training"]
    floor = query.get("min_step") or 0
    try:
        pages = client.iter_checkpoints(
            session_id=query.get("session_id"), base_model=query.get("base_model"), type=kind
        )
        for found in pages:  # newest first: the first match is the latest
            if found.type == kind and int(found.step) >= floor:
                yield found
    except Exception as exc:
        raise UserError(doing, "checkpoints", subject, *explain(exc)) from exc
