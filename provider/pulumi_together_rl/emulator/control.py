"""A thin client of the emulator's control API (``/_emulator``). Needs only httpx (cheap to import)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import httpx

from .settings import key_digest


class EmulatorControlError(RuntimeError):
    """The control API refused a call (its error envelope's message is the exception message)."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(
            f"emulator control: HTTP {status}: {message}" + (f" (param={param})" if param else "")
        )
        self.status = status
        self.param = param


class EmulatorControl:
    """Drive an emulator from a test: reset, settings, clock, injected failures and faults, request log."""

    def __init__(self, base_url: str, *, timeout: float = 10.0) -> None:
        base = base_url.rstrip("/")
        if base.endswith("/v1"):
            base = base[: -len("/v1")]
        self.base_url = base
        # TLS verification only matters for https; skipping the SSL context for plain http saves ~40 ms per
        # client (tests build one per test).
        self._http = httpx.Client(
            base_url=f"{base}/_emulator", timeout=timeout, verify=not base.startswith("http://")
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> EmulatorControl:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"EmulatorControl({self.base_url!r})"

    #: ``key_digest(key)``: how the state (``created_with``) and the request log (``key``) name a key.
    key_digest = staticmethod(key_digest)

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._http.request(method, path, **kwargs)
        if response.status_code >= 400:
            try:
                err = response.json()["error"]
                message, param = str(err.get("message")), err.get("param")
            except (ValueError, KeyError, TypeError):
                message, param = response.text, None
            raise EmulatorControlError(response.status_code, message, param)
        return response.json()

    # ---------------------------------------------------------------------------------------- verbs

    def reset(self) -> None:
        """Forget objects, faults, armed failures and the request log; restore start settings and clock."""
        self._call("POST", "/reset")

    def settings(self) -> dict[str, Any]:
        """The settings, ``api_key`` and ``api_keys`` as their :func:`key_digest` (never the keys)."""
        return self._call("GET", "/settings")

    def configure(self, **settings: Any) -> dict[str, Any]:
        """PATCH the settings (``timings`` merge key by key). Returns the full new settings, keys as digests."""
        return self._call("PATCH", "/settings", json=settings)

    def now(self) -> datetime:
        return _parse_time(self._call("GET", "/clock")["now"])

    def advance(self, seconds: float) -> datetime:
        """Move the emulator clock forward; returns the new emulator time."""
        return _parse_time(self._call("POST", "/clock/advance", json={"seconds": seconds})["now"])

    def fail_next(
        self, kind: str, code: str, message: str | None = None, id: str | None = None
    ) -> dict[str, Any]:
        """Make the next transition of object ``id`` (or of any ``kind`` object) land in ERROR (``code``)."""
        body: dict[str, Any] = {"kind": kind, "code": code}
        if message is not None:
            body["message"] = message
        if id is not None:
            body["id"] = id
        return self._call("POST", "/fail-next", json=body)

    def add_fault(self, **rule: Any) -> str:
        """Add a fault rule (see faults.py for the fields); returns its id."""
        return self._call("POST", "/faults", json=rule)["id"]

    def faults(self) -> list[dict[str, Any]]:
        return self._call("GET", "/faults")["data"]

    def remove_fault(self, fault_id: str) -> None:
        self._call("DELETE", f"/faults/{fault_id}")

    def clear_faults(self) -> None:
        self._call("DELETE", "/faults")

    def set_list_extras(self, collection: str, items: list[Any]) -> None:
        """Append ``items`` (raw JSON values, sent as they are) to every answer of the list ``collection``
        (``"model-resources"`` or ``"training-sessions"``), replacing its earlier extras; ``[]`` for none.
        An unreadable object in the API's lists: ``set_list_extras("model-resources", [{"id": "x", "status": 7}])``.
        """
        self._call("PUT", f"/list-extras/{collection}", json={"items": items})

    def list_extras(self) -> dict[str, list[Any]]:
        """The extra items of each list that has some."""
        return self._call("GET", "/list-extras")["data"]

    def advance_session(self, session_id: str, steps: int) -> dict[str, Any]:
        """``steps`` optimizer steps of a RUNNING session (its ``step`` and ``policy_state`` move on)."""
        return self._call("POST", f"/training-sessions/{session_id}/advance", json={"steps": steps})

    def save_checkpoint(
        self, session_id: str, kind: str = "training", step: int | None = None
    ) -> dict[str, Any]:
        """The session saves a ``training`` or ``inference`` checkpoint at ``step`` (default: its step now)."""
        body: dict[str, Any] = {"type": kind}
        if step is not None:
            body["step"] = step
        return self._call("POST", f"/training-sessions/{session_id}/checkpoints", json=body)

    def requests(self, clear: bool = False) -> list[dict[str, Any]]:
        """The public requests received so far: ``{method, path, query, status, fault, handled, at, key, ...}``
        (``key``: the :func:`key_digest` of the key that sent it, None without one)."""
        return self._call("GET", "/requests", params={"clear": "true"} if clear else None)["data"]

    def clear_requests(self) -> None:
        self._call("DELETE", "/requests")

    def state(self) -> dict[str, Any]:
        """``{"model_resources": [...], "training_sessions": [...], "created_with": {id: digest}}``: the objects
        as wire dicts, newest first, and the :func:`key_digest` of the key whose create made each (None: made
        without a key), which no API answer shows."""
        return self._call("GET", "/state")


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
