"""A GPU and a session on it, stopped at ``stopAfter`` (stack config: a duration or an RFC 3339 time); the
session at ``trialStopAfter`` instead when that is set (``none``: no deadline)."""

import pulumi

from pulumi_together_rl import ModelResource, ModelResourceArgs, TrainingSession, TrainingSessionArgs

config = pulumi.Config()
until = config.require("stopAfter")
trial_until = config.get("trialStopAfter") or until
gpu = ModelResource("gpu", ModelResourceArgs(base_model="Qwen/Qwen3.5-4B", stop_after=until))
trial = TrainingSession(
    "trial",
    TrainingSessionArgs(model_resource=gpu, stop_after=None if trial_until == "none" else trial_until),
)
pulumi.export("gpu", gpu.id)
pulumi.export("trial", trial.id)
