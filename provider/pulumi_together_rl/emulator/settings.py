"""The emulator's settings: their defaults (:data:`DEFAULT_SETTINGS`) and the validation of a settings patch.

A state's duration is read from the settings' ``timings`` when the transition is evaluated (see
:mod:`.lifecycle`); ``supported_models``, while it is not null, replaces the built-in table
(:data:`.tables.BUILTIN_SUPPORTED_MODELS`).

Keys: ``api_key`` and ``api_keys`` are the bearer keys accepted (any non-empty key when both are unset), all of
them keys of the one user ``user_id`` (a team's keys of one project: every key sees every object as
``created_by=me``). Which key made an object, and which key sent a request, is known to the control API only,
as :func:`key_digest` (never the key itself). The control API takes keys in a settings patch (how a test makes a
team's keys) but answers them as digests too (:func:`shown_settings`): it has no authentication.
"""

from __future__ import annotations

import copy
import hashlib
import math
import re
from typing import Any

from .errors import InvalidRequest
from .tables import SUPPORTED_MODEL_GPU_TYPES

TIMING_KEYS = (
    "resource_pending",
    "resource_creating",
    "resource_stopping",
    "session_creating",
    "session_stopping",
)
DEFAULT_SETTINGS: dict[str, Any] = {
    "timings": {
        "resource_pending": 2.0,
        "resource_creating": 3.0,
        "resource_stopping": 1.0,
        "session_creating": 1.0,
        "session_stopping": 1.0,
    },
    "api_key": None,
    # More keys of the same user, accepted besides api_key (a team's keys: one user, one key per member or CI
    # job). The control API tells their objects and requests apart by key_digest; the public API cannot.
    "api_keys": [],
    "user_id": "user_emulator",
    "conflict_status": 409,
    "session_cap_lora": 5,
    "session_cap_full": 1,
    "queue_position": None,
    "supported_models": None,
    # Read-after-write lag and a stop that does not take, which the real API may show and the fault rules
    # cannot express: a GET or stop of an object younger than read_lag seconds answers 404, a list leaves out
    # objects younger than list_lag seconds, and the next stops_ignored stops answer as if accepted while
    # changing nothing.
    "read_lag": 0.0,
    "list_lag": 0.0,
    "stops_ignored": 0,
}


def key_digest(key: str) -> str:
    """What the control API says of a key (``key-`` and 16 hex digits of its SHA-256): enough to tell a team's
    keys apart in the state and the request log, never the key itself."""
    return "key-" + hashlib.sha256(key.encode()).hexdigest()[:16]


KEY_DIGEST = re.compile(r"key-[0-9a-f]{16}")
"""The shape of every :func:`key_digest`."""


def shown_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings as the control API answers them: ``api_key`` and ``api_keys`` as their :func:`key_digest`.
    Anyone who can reach the emulator can read its control API, and a test knows the keys it set."""
    out = copy.deepcopy(settings)
    out["api_key"] = None if settings["api_key"] is None else key_digest(settings["api_key"])
    out["api_keys"] = [key_digest(key) for key in settings["api_keys"]]
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _merge_settings(current: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Validate ``patch`` and return ``current`` with it applied (``timings`` merged key by key)."""
    if not isinstance(patch, dict):
        raise InvalidRequest("settings must be an object.")
    out = copy.deepcopy(current)
    for key, value in patch.items():
        if key not in DEFAULT_SETTINGS:
            raise InvalidRequest(
                f"unknown setting {key!r}; known: {', '.join(DEFAULT_SETTINGS)}.",
                param=key,
                code="unknown_setting",
            )
        if key == "timings":
            if not isinstance(value, dict):
                raise InvalidRequest("timings must be an object of seconds.", param="timings")
            for name, seconds in value.items():
                if name not in TIMING_KEYS:
                    raise InvalidRequest(
                        f"unknown timing {name!r}; known: {', '.join(TIMING_KEYS)}.", param=f"timings.{name}"
                    )
                if not _is_number(seconds) or seconds < 0 or not math.isfinite(seconds):
                    raise InvalidRequest(f"timings.{name} must be a number >= 0.", param=f"timings.{name}")
                out["timings"][name] = float(seconds)
        elif key == "api_key":
            if value is not None and (not isinstance(value, str) or not value):
                raise InvalidRequest("api_key must be a non-empty string or null.", param=key)
            out[key] = value
        elif key == "api_keys":
            if not isinstance(value, list) or not all(isinstance(k, str) and k for k in value):
                raise InvalidRequest("api_keys must be a list of non-empty strings ([] for none).", param=key)
            out[key] = list(dict.fromkeys(value))
        elif key == "user_id":
            if not isinstance(value, str) or not value or value == "me":
                raise InvalidRequest("user_id must be a non-empty string other than 'me'.", param=key)
            out[key] = value
        elif key == "conflict_status":
            if not isinstance(value, int) or isinstance(value, bool) or not 400 <= value <= 599:
                raise InvalidRequest("conflict_status must be an HTTP status between 400 and 599.", param=key)
            out[key] = value
        elif key in ("session_cap_lora", "session_cap_full"):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InvalidRequest(f"{key} must be an integer >= 0.", param=key)
            out[key] = value
        elif key == "queue_position":
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise InvalidRequest("queue_position must be an integer >= 1 or null.", param=key)
            out[key] = value
        elif key == "supported_models":
            out[key] = None if value is None else _check_supported_models(value)
        elif key in ("read_lag", "list_lag"):
            if not _is_number(value) or value < 0 or not math.isfinite(value):
                raise InvalidRequest(f"{key} must be a number of seconds >= 0.", param=key)
            out[key] = float(value)
        elif key == "stops_ignored":
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InvalidRequest("stops_ignored must be an integer >= 0.", param=key)
            out[key] = value
    return out


def _check_supported_models(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict) and "data" in value:
        value = value["data"]
    if not isinstance(value, list):
        raise InvalidRequest("supported_models must be a list of models or null.", param="supported_models")
    for i, model in enumerate(value):
        where = f"supported_models[{i}]"
        if (
            not isinstance(model, dict)
            or not isinstance(model.get("base_model"), str)
            or not model["base_model"]
        ):
            raise InvalidRequest(f"{where} must be an object with a base_model.", param=where)
        gpus = ", ".join(SUPPORTED_MODEL_GPU_TYPES)
        if model.get("default_gpu_type") not in SUPPORTED_MODEL_GPU_TYPES:
            raise InvalidRequest(
                f"{where}.default_gpu_type must be one of: {gpus}.", param=f"{where}.default_gpu_type"
            )
        configs = model.get("compute_configs")
        if configs is None:
            continue
        if not isinstance(configs, list):
            raise InvalidRequest(f"{where}.compute_configs must be a list.", param=f"{where}.compute_configs")
        for j, config in enumerate(configs):
            at = f"{where}.compute_configs[{j}]"
            if not isinstance(config, dict) or config.get("gpu_type") not in SUPPORTED_MODEL_GPU_TYPES:
                raise InvalidRequest(
                    f"{at} must be an object whose gpu_type is one of: {gpus}.", param=f"{at}.gpu_type"
                )
    return copy.deepcopy(value)
