"""Adopt: take over objects created outside Pulumi, and reference one that stays outside.

`pulumi import` cannot work for dynamic resources (pulumi/pulumi#16175), so both resources take an `adopt_id`:
on create they read the existing object instead of making a new one, and from then on Pulumi manages it
(`pulumi destroy` stops it). `.get()` only reads an object: Pulumi never changes or stops it.

Stack config (project `together-rl-adopt`):
  resourceId         id of an existing model resource to adopt (required)
  sessionId          id of an existing training session on it to adopt (required)
  sharedResourceId   id of another model resource to reference read-only (optional)
  baseModel          the adopted resource's base model (default "Qwen/Qwen3.5-4B")
  sessionName        the adopted session's display name (default "adopted-session")
"""

import pulumi

from pulumi_together_rl import ModelResource, ModelResourceArgs, TrainingSession, TrainingSessionArgs

config = pulumi.Config()

gpu = ModelResource(
    "adopted-gpu",
    ModelResourceArgs(
        base_model=config.get("baseModel") or "Qwen/Qwen3.5-4B",
        adopt_id=config.require("resourceId"),
    ),
)

run = TrainingSession(
    "adopted-session",
    TrainingSessionArgs(
        model_resource=gpu,
        display_name=config.get("sessionName") or "adopted-session",
        adopt_id=config.require("sessionId"),
    ),
)

pulumi.export("adopted_resource_id", gpu.id)
pulumi.export("adopted_resource_status", gpu.status)
pulumi.export("adopted_session_id", run.id)
pulumi.export("adopted_session_status", run.status)

shared_id = config.get("sharedResourceId")
if shared_id:
    shared = ModelResource.get("shared-gpu", shared_id)
    pulumi.export("shared_resource_status", shared.status)
    pulumi.export("shared_resource_base_model", shared.base_model)
