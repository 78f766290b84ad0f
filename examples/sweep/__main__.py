"""Sweep: one LoRA model resource and N training sessions on it, one per LoRA rank.

Stack config (project `together-rl-sweep`):
  sessions      N, the number of sessions (default 3; a LoRA resource holds at most 5 at once)
  loraRanks     the LoRA rank of each session, a JSON list such as [8, 16, 32] (reused in turn when shorter)
  namePrefix    prefix of every session's display name and W&B group (default "sweep")
  wandbProject  W&B project recorded in each session's metadata (default "grpo-sweep")
  wandbEntity   W&B entity (optional)
  baseModel     the base model (default "Qwen/Qwen3.5-4B")

Changing namePrefix renames the sessions in place (PATCH); changing a rank replaces that session only.
"""

import pulumi

from pulumi_together_rl import ModelResource, ModelResourceArgs, TrainingSession, TrainingSessionArgs

config = pulumi.Config()
count = config.get_int("sessions")
count = 3 if count is None else count
ranks = config.get_object("loraRanks") or [8, 16, 32]
prefix = config.get("namePrefix") or "sweep"
wandb_project = config.get("wandbProject") or "grpo-sweep"
wandb_entity = config.get("wandbEntity")
base_model = config.get("baseModel") or "Qwen/Qwen3.5-4B"

if count < 1:
    raise ValueError(f"config sessions must be at least 1, got {count}: pulumi config set sessions 3")
if not isinstance(ranks, list) or not ranks or not all(isinstance(rank, int) for rank in ranks):
    raise ValueError(
        f"config loraRanks must be a JSON list of integers, got {ranks!r}: "
        "pulumi config set loraRanks '[8, 16, 32]'"
    )

gpu = ModelResource(
    "sweep-gpu",
    ModelResourceArgs(base_model=base_model, lora_enabled=True, compute_config={"num_generator_replicas": 1}),
)

sessions = []
for index in range(count):
    rank = ranks[index % len(ranks)]
    display_name = f"{prefix}-{index}"
    wandb = {"project": wandb_project, "group": prefix, "run_name": display_name}
    if wandb_entity:
        wandb["entity"] = wandb_entity
    # The Pulumi name is stable ("trial-<i>"): a new rank replaces that trial rather than adding a resource.
    sessions.append(
        TrainingSession(
            f"trial-{index}",
            TrainingSessionArgs(
                model_resource=gpu,
                display_name=display_name,
                lora_config={"rank": rank, "alpha": 2 * rank},
                metadata={"wandb": wandb},
            ),
        )
    )

pulumi.export("model_resource_id", gpu.id)
pulumi.export("model_resource_status", gpu.status)
pulumi.export("session_ids", [session.id for session in sessions])
pulumi.export("session_statuses", [session.status for session in sessions])
# The ranks the API applied (effective_lora_config has the server defaults filled in).
pulumi.export(
    "lora_ranks",
    [
        session.effective_lora_config.apply(lambda lora: int(lora["rank"]) if lora else None)
        for session in sessions
    ],
)
