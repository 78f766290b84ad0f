"""Shared helpers of the emulator tests: a plain httpx client on the emulator and small verbs over it.

These tests speak raw HTTP on purpose: they pin the wire behaviour independently of the project's client.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import httpx

RESOURCES = "/v1/rl/model-resources"
SESSIONS = "/v1/rl/training-sessions"

R_PENDING = "MODEL_RESOURCES_STATUS_PENDING"
R_CREATING = "MODEL_RESOURCES_STATUS_CREATING"
R_READY = "MODEL_RESOURCES_STATUS_READY"
R_STOPPING = "MODEL_RESOURCES_STATUS_STOPPING"
R_STOPPED = "MODEL_RESOURCES_STATUS_STOPPED"
R_ERROR = "MODEL_RESOURCES_STATUS_ERROR"
S_CREATING = "TRAINING_SESSION_STATUS_CREATING"
S_RUNNING = "TRAINING_SESSION_STATUS_RUNNING"
S_STOPPING = "TRAINING_SESSION_STATUS_STOPPING"
S_STOPPED = "TRAINING_SESSION_STATUS_STOPPED"
S_ERROR = "TRAINING_SESSION_STATUS_ERROR"
S_EXPIRED = "TRAINING_SESSION_STATUS_EXPIRED"

SMALL_MODEL = "Qwen/Qwen3.5-4B"  # LoRA (max_rank 64) + full + generator
BIG_MODEL = "Qwen/Qwen3.5-35B-A3B"  # LoRA only, max_rank 32
TRAINER_ONLY_MODEL = "Qwen/Qwen3-0.6B"  # no generator_config


class Api:
    """A raw HTTP client of the emulator's public API with a few shortcuts."""

    def __init__(self, base_url: str, api_key: str) -> None:
        self.http = httpx.Client(
            base_url=base_url,
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=10.0,
            verify=False,  # plain http on loopback; skips building an SSL context (~40 ms)
        )

    def close(self) -> None:
        self.http.close()

    def ok(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.http.request(method, path, **kwargs)
        assert response.status_code == 200, (response.status_code, response.text)
        return response.json()

    def error(self, method: str, path: str, status: int, **kwargs: Any) -> dict[str, Any]:
        """Assert an error answer with the envelope; return its ``error`` object."""
        response = self.http.request(method, path, **kwargs)
        assert response.status_code == status, (response.status_code, response.text)
        body = response.json()
        assert set(body) == {"error"}, body
        assert set(body["error"]) == {"message", "type", "param", "code"}, body
        assert body["error"]["message"]
        return body["error"]

    def resource(self, **body: Any) -> dict[str, Any]:
        body.setdefault("base_model", SMALL_MODEL)
        return self.ok("POST", RESOURCES, json=body)

    def get_resource(self, resource_id: str) -> dict[str, Any]:
        return self.ok("GET", f"{RESOURCES}/{resource_id}")

    def ready_resource(self, **body: Any) -> dict[str, Any]:
        """Create a resource and return it READY (timings are 0 unless the test changed them)."""
        created = self.resource(**body)
        got = self.get_resource(created["id"])
        assert got["status"] == R_READY, got
        return got

    def session(self, resource_id: str, **body: Any) -> dict[str, Any]:
        return self.ok("POST", SESSIONS, json={"model_resources_id": resource_id, **body})

    def get_session(self, session_id: str) -> dict[str, Any]:
        return self.ok("GET", f"{SESSIONS}/{session_id}")


def ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
