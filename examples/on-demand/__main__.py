"""Provision without holding: a model resource that stops itself after five idle minutes, kept READY only for
a declared window.

``inactive_timeout=300`` is the shortest the API takes: a GPU nobody trains on stops billing within five minutes
of its last session operation. For a demo or an evaluation that must find it READY without a session open, set
``keepReadyUntil`` (an RFC 3339 time, at most 30 days ahead): the provider extends the expiry to that time at
``up`` and at each ``pulumi refresh``, and at that time the resource stops itself (no session kept it busy). The refresh that finds it stopped reports an
idle stop and drops it from the state; the next ``pulumi up`` provisions a new one.

Stack config (project ``together-rl-on-demand``):
  baseModel        the base model (default "Qwen/Qwen3.5-4B")
  keepReadyUntil   hold it READY until then, e.g. "2026-12-04T18:00:00Z" (default: not held)
"""

import pulumi

from pulumi_together_rl import ModelResource, ModelResourceArgs

config = pulumi.Config()

gpu = ModelResource(
    "on-demand",
    ModelResourceArgs(
        base_model=config.get("baseModel") or "Qwen/Qwen3.5-4B",
        inactive_timeout=300,
        keep_ready_until=config.get("keepReadyUntil"),
    ),
)

pulumi.export("id", gpu.id)
pulumi.export("status", gpu.status)
pulumi.export("expires_at", gpu.expires_at)
pulumi.export("price_per_hour", gpu.price_per_hour)
