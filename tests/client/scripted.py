"""Scripted HTTP for client tests: an ``httpx.MockTransport`` that answers from a list of steps.

A step is an ``httpx.Response``, an httpx exception class (raised with the request attached), or a callable
``request -> Response``. Every request is recorded; running out of steps fails the test loudly.

With ``catalog=True``, ``GET /v1/rl/supported-models`` is the server's catalog, not a step: it is answered
from :data:`CATALOG` (the strict lookup of a lost create asks it for the server's defaults) and counted in
``catalog_requests``, outside ``requests``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx

from pulumi_together_rl.client import TogetherRL

KEY = "tk-scripted-5ecret-abcdef0123456789"
BASE = "https://api.test"


CATALOG = {
    "data": [
        {
            "base_model": "Qwen/Qwen3.5-4B",
            "default_gpu_type": "B200-SXM",
            "compute_configs": [
                {
                    "gpu_type": "B200-SXM",
                    "generator_config": {"context_length": 32768},
                    "trainer_config": {
                        "lora": {"max_batch_size": 64, "max_rank": 64, "max_seq_length": 32768},
                        "full": {"max_batch_size": 32, "max_seq_length": 32768},
                    },
                }
            ],
        }
    ]
}


class Script:
    def __init__(self, *steps: Any, catalog: bool = False) -> None:
        self.steps = list(steps)
        self.requests: list[httpx.Request] = []
        self.catalog = catalog
        self.catalog_requests = 0

    def add(self, *steps: Any) -> None:
        self.steps.extend(steps)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.catalog and request.method == "GET" and request.url.path.endswith("/rl/supported-models"):
            self.catalog_requests += 1
            return httpx.Response(200, json=CATALOG)
        self.requests.append(request)
        if not self.steps:
            raise AssertionError(f"unexpected request: {request.method} {request.url}")
        step = self.steps.pop(0)
        if isinstance(step, type) and issubclass(step, httpx.TransportError):
            raise step(f"scripted {step.__name__}", request=request)
        if callable(step) and not isinstance(step, httpx.Response):
            return step(request)
        return step

    def calls(self, method: str | None = None) -> list[str]:
        """``"METHOD /path"`` of every request (optionally only one method)."""
        return [f"{r.method} {r.url.path}" for r in self.requests if method is None or r.method == method]


class Sleeps(list):
    """A fake ``sleep`` that records the delays it was asked for."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def reply(status: int = 200, body: Any = None, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, json=body if body is not None else {}, headers=headers)


def error(status: int, message: str = "boom", *, type: str = "error", code=None, param=None, headers=None):
    body = {"error": {"message": message, "type": type, "param": param, "code": code}}
    return reply(status, body, headers)


def make_client(
    script: Script, *, sleeps: Sleeps | None = None, rng: Callable[[], float] = lambda: 1.0, **kw
):
    return TogetherRL(
        api_key=kw.pop("api_key", KEY),
        base_url=kw.pop("base_url", BASE),
        http_transport=httpx.MockTransport(script),
        sleep=sleeps if sleeps is not None else Sleeps(),
        rng=rng,
        # One lookup after an answered failure, unless a test is about the list lagging a create.
        list_lag=kw.pop("list_lag", 0.0),
        **kw,
    )


def iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def now() -> datetime:
    return datetime.now(timezone.utc)


def resource_json(
    id: str = "mr_1", *, created_at: datetime | None = None, **overrides: Any
) -> dict[str, Any]:
    created = iso(created_at or now())
    body: dict[str, Any] = {
        "id": id,
        "status": "MODEL_RESOURCES_STATUS_PENDING",
        "status_details": {"queue_position": 1},
        "base_model": "Qwen/Qwen3.5-4B",
        "compute_config": {"num_generator_replicas": 1, "gpu_type": "B200-SXM"},
        "lora_enabled": True,
        "optimizer_config": {"adam": {}},
        "created_at": created,
        "updated_at": created,
        "created_by": "user_1",
        "inactive_timeout": 3600,
    }
    body.update(overrides)
    return body


def session_json(id: str = "ts_1", *, created_at: datetime | None = None, **overrides: Any) -> dict[str, Any]:
    created = iso(created_at or now())
    body: dict[str, Any] = {
        "id": id,
        "status": "TRAINING_SESSION_STATUS_CREATING",
        "model_resources_id": "mr_1",
        "base_model": "Qwen/Qwen3.5-4B",
        "created_by": "user_1",
        "created_at": created,
        "updated_at": created,
        "step": "0",
        "metadata": {},
        "inference_checkpoints": [],
        "training_checkpoints": [],
        "policy_state": {
            "trainer_step": "0",
            "target_weights_version": "0",
            "applied_weights_version": "0",
            "pending_publish": False,
        },
        "lora_config": {"rank": 32, "alpha": 64, "dropout": 0, "train_unembed": True},
    }
    body.update(overrides)
    return body


def page(items: list[dict[str, Any]], *, next_cursor: str = "", limit: int = 100) -> httpx.Response:
    return reply(
        200,
        {"data": items, "meta": {"limit": limit, "has_more": bool(next_cursor), "next_cursor": next_cursor}},
    )


def ago(seconds: float) -> datetime:
    return now() - timedelta(seconds=seconds)


def body_of(request: httpx.Request) -> Any:
    return json.loads(request.content) if request.content else None
