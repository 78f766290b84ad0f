"""A user's Pulumi program, written the way the README and examples/ write one, against the public surface only.

tests/typing/test_user_program.py runs ``mypy --strict`` on it as a user's checker would see the installed
package: the typed Args, their TypedDicts and the resources' typed outputs must reach it (``py.typed``) and
accept this program as it stands. The suite only type-checks it; it never runs it as a Pulumi program.
"""

from __future__ import annotations

import pulumi

from pulumi_together_rl import (
    Checkpoint,
    ComputeConfigArgs,
    LoraConfigArgs,
    ModelResource,
    ModelResourceArgs,
    MuonConfigArgs,
    OptimizerConfigArgs,
    SessionMetadataArgs,
    TrainingSession,
    TrainingSessionArgs,
    WandbMetadataArgs,
    get_checkpoints,
    latest_checkpoint,
)

config = pulumi.Config()
stack = pulumi.get_stack()
base_model = config.get("baseModel") or "Qwen/Qwen3.5-4B"
count = config.get_int("sessions") or 3
ranks = [8, 16, 32]
prefix = config.get("namePrefix") or "sweep"
wandb_entity = config.get("wandbEntity")
gpu_type = config.get("gpuType")
shared_id = config.get("sharedResourceId")

# A LoRA resource for RL, its dicts spelled inline as the README does.
gpu = ModelResource(
    "sweep-gpu",
    ModelResourceArgs(
        base_model=base_model,
        lora_enabled=True,
        compute_config={"gpu_type": "H100-80GB", "num_generator_replicas": 1},
        optimizer_config={"muon": {"scaling_strategy": "MUON_SCALING_STRATEGY_MATCH_ADAM"}},
        inactive_timeout=3600,
        create_timeout=7200,
        max_price_per_hour=40.0,
        keep_ready_until="2026-12-04T18:00:00Z",
    ),
)

# A full-weight trainer, its dicts built ahead (and completed from config) under the package's TypedDicts.
compute: ComputeConfigArgs = {"num_generator_replicas": 0}
if gpu_type:
    compute["gpu_type"] = gpu_type
muon: MuonConfigArgs = {}
optimizer: OptimizerConfigArgs = {"muon": muon} if config.get_bool("muon") else {"adam": {}}
trainer = ModelResource(
    "sft-gpu",
    ModelResourceArgs(
        base_model=base_model,
        lora_enabled=False,
        compute_config=compute,
        optimizer_config=optimizer,
        delete_timeout=600.0,
        force_stop=True,
    ),
    opts=pulumi.ResourceOptions(protect=False),
)

# The sweep: one session per rank, W&B bookkeeping grouped by the model resource it ran on (an Output).
sessions: list[TrainingSession] = []
for index in range(count):
    rank = ranks[index % len(ranks)]
    display_name = f"{prefix}-{index}"
    wandb: WandbMetadataArgs = {"project": "grpo-sweep", "group": gpu.id, "run_name": display_name}
    if wandb_entity:
        wandb["entity"] = wandb_entity
    lora: LoraConfigArgs = {"rank": rank, "alpha": 2 * rank, "dropout": 0.05, "train_unembed": False}
    metadata: SessionMetadataArgs = {"wandb": wandb}
    sessions.append(
        TrainingSession(
            f"trial-{index}",
            TrainingSessionArgs(
                model_resource=gpu,
                display_name=display_name,
                lora_config=lora,
                metadata=metadata,
                create_timeout=1800,
            ),
        )
    )

# By id (a resource made elsewhere, or here an Output), with Outputs inside the dicts too.
full = TrainingSession(
    "full-weight",
    TrainingSessionArgs(
        model_resources_id=trainer.id,
        load_optimizer=True,
        display_name=trainer.base_model.apply(lambda model: f"sft-{model.split('/')[-1]}"),
        metadata={"wandb": {"project": "sft", "run_name": pulumi.Output.concat(stack, "-", trainer.id)}},
    ),
    opts=pulumi.ResourceOptions(depends_on=[gpu]),
)
quick = TrainingSession(
    "quick",
    TrainingSessionArgs(
        model_resource=gpu,
        lora_config={"rank": pulumi.Output.from_input(config.get_int("quickRank") or 32), "seed": 7},
    ),
)


def applied_rank(lora: dict[str, object] | None) -> int | None:
    rank = lora.get("rank") if lora else None
    return int(rank) if isinstance(rank, (int, float)) else None


# Typed outputs: each attribute is an Output of its own type, and .apply sees that type.
status: pulumi.Output[str] = gpu.status
price: pulumi.Output[float | None] = gpu.price_per_hour
replicas: pulumi.Output[int] = gpu.effective_compute_config.apply(
    lambda layout: int(layout["num_generator_replicas"])
)
step: pulumi.Output[int] = full.step
checkpoint_ids: pulumi.Output[list[str]] = full.training_checkpoints.apply(
    lambda checkpoints: [str(checkpoint["id"]) for checkpoint in checkpoints]
)
pulumi.export("model_resource_id", gpu.id)
pulumi.export("model_resource_status", status)
pulumi.export("price_per_hour", price)
pulumi.export("currency", gpu.currency)
pulumi.export("generator_replicas", replicas)
pulumi.export("session_ids", [session.id for session in sessions])
pulumi.export("session_statuses", [session.status for session in sessions])
pulumi.export("lora_ranks", [session.effective_lora_config.apply(applied_rank) for session in sessions])
pulumi.export("full_step", step)
pulumi.export("full_checkpoints", checkpoint_ids)

# Checkpoints as data: typed answers, a step floor, and the id a resume takes.
latest: pulumi.Output[Checkpoint] = latest_checkpoint(session_id=full.id, min_step=100)
every: pulumi.Output[list[Checkpoint]] = get_checkpoints(base_model=base_model, type="inference")
pulumi.export("latest_checkpoint_id", latest.apply(lambda checkpoint: checkpoint["id"]))
pulumi.export("inference_steps", every.apply(lambda found: [checkpoint["step"] for checkpoint in found]))
pulumi.export("quick_base_model", quick.base_model)
pulumi.export("quick_display_name", quick.display_name)

# Read-only references by id: .get() returns the resource class itself.
if shared_id:
    shared: ModelResource = ModelResource.get("shared-gpu", shared_id)
    watched: TrainingSession = TrainingSession.get("watched", pulumi.Output.from_input("ts-123"))
    pulumi.export("shared_status", shared.status)
    pulumi.export("shared_lora", shared.effective_lora_enabled)
    pulumi.export("watched_step", watched.step)
