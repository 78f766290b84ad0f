"""One model resource and one session whose ``displayName`` and W&B run name are secret stack config."""

import pulumi

from pulumi_together_rl import ModelResource, ModelResourceArgs, TrainingSession, TrainingSessionArgs

config = pulumi.Config()
name = config.require_secret("displayName")
gpu = ModelResource("gpu", ModelResourceArgs(base_model="Qwen/Qwen3.5-4B"))
session = TrainingSession(
    "trial",
    TrainingSessionArgs(
        model_resource=gpu,
        display_name=name,
        metadata={"wandb": {"project": "grpo", "run_name": name}},
    ),
)
pulumi.export("session_id", session.id)
