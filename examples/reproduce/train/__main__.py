"""The training stack: a LoRA session on a model resource, publishing its newest training checkpoint.

The session's ``latest_training_checkpoint_id`` / ``_step`` outputs move as training saves checkpoints, as of the
last ``pulumi refresh`` (a new checkpoint is never a diff). ``pulumi up --refresh`` publishes them as this
stack's outputs, which the resume stack reads through a ``StackReference``.

Stack config (project ``together-rl-reproduce-train``):
  baseModel   the base model (default "Qwen/Qwen3.5-4B")
  rank        the LoRA rank (default 8)
"""

import pulumi

from pulumi_together_rl import ModelResource, ModelResourceArgs, TrainingSession, TrainingSessionArgs

config = pulumi.Config()
base_model = config.get("baseModel") or "Qwen/Qwen3.5-4B"

gpu = ModelResource(
    "train-gpu", ModelResourceArgs(base_model=base_model, compute_config={"num_generator_replicas": 1})
)
run = TrainingSession(
    "train",
    TrainingSessionArgs(model_resource=gpu, lora_config={"rank": config.get_int("rank") or 8}),
)

pulumi.export("base_model", base_model)
pulumi.export("session_id", run.id)
pulumi.export("checkpoint_id", run.latest_training_checkpoint_id)
pulumi.export("checkpoint_step", run.latest_training_checkpoint_step)
