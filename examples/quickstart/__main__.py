"""Quickstart: one LoRA model resource and one training session on it.

`pulumi up` leaves the resource READY and the session RUNNING; `pulumi destroy` stops both. Run it from the
repository root (the root Pulumi.yaml points `main` here), or with `make demo` against the bundled emulator.
"""

import pulumi

from pulumi_together_rl import ModelResource, ModelResourceArgs, TrainingSession, TrainingSessionArgs

config = pulumi.Config()
base_model = config.get("baseModel") or "Qwen/Qwen3.5-4B"

# A GPU allocation with the base model loaded; billed while READY. Every input is fixed at creation.
gpu = ModelResource(
    "qwen",
    ModelResourceArgs(
        base_model=base_model,
        compute_config={"num_generator_replicas": 1},
    ),
)

# A LoRA training session on it. display_name defaults to the Pulumi name ("gsm8k"); it and metadata change in
# place, anything else (such as the LoRA rank) replaces the session.
run = TrainingSession(
    "gsm8k",
    TrainingSessionArgs(
        model_resource=gpu,
        lora_config={"rank": 32},
        metadata={"wandb": {"project": "grpo-gsm8k"}},
    ),
)

pulumi.export("model_resource_id", gpu.id)
pulumi.export("model_resource_status", gpu.status)
pulumi.export("training_session_id", run.id)
pulumi.export("training_session_status", run.status)
pulumi.export("base_model", run.base_model)
