"""A small training stack for the program tests: one LoRA model resource and a session per configured rank."""

import pulumi

from pulumi_together_rl import ModelResource, ModelResourceArgs, TrainingSession, TrainingSessionArgs

config = pulumi.Config()
ranks = config.get_object("ranks") or [8]

gpu = ModelResource(
    "gpu",
    ModelResourceArgs(
        base_model=config.get("baseModel") or "Qwen/Qwen3.5-4B",
        compute_config={"num_generator_replicas": 1},
    ),
)

sessions = [
    TrainingSession(
        f"run-{index}",
        TrainingSessionArgs(
            model_resources_id=gpu.id,
            lora_config={"rank": rank},
            display_name=config.get(f"displayName{index}"),
            metadata={"wandb": {"project": "grpo", "run_name": f"run-{index}"}},
        ),
    )
    for index, rank in enumerate(ranks)
]

pulumi.export("gpu_id", gpu.id)
pulumi.export("gpu_status", gpu.status)
pulumi.export("session_ids", [session.id for session in sessions])
pulumi.export("session_resource_ids", [session.model_resources_id for session in sessions])
pulumi.export("session_statuses", [session.status for session in sessions])
pulumi.export("session_base_models", [session.base_model for session in sessions])
pulumi.export("display_names", [session.display_name for session in sessions])
