"""The resume stack: a session that starts from a checkpoint of the training stack, pinned in this stack's config.

``checkpointId`` (in ``Pulumi.<stack>.yaml``, committed) is the pin: the same id gives the same starting point
whenever, and wherever, this stack runs. The training stack (``source``, read through a ``StackReference``)
tells which checkpoint it published last; this stack exports that beside its own pin, so a newer checkpoint is
visible without moving the pin. Unpinned, the stack follows ``source`` (with a warning): each new checkpoint
published there would replace this session.

Preview checks the resume against the checkpoint itself: it exists, suits ``loadOptimizer``, was trained from
this resource's base model, and has this session's LoRA rank; each failure names the field.

Stack config (project ``together-rl-reproduce-resume``):
  source         the training stack, e.g. "organization/together-rl-reproduce-train/dev" (required)
  checkpointId   the pinned checkpoint (``pulumi stack output -s <source> checkpoint_id``); unset: follow source
  loadOptimizer  also restore the optimizer state (default true; needs a training checkpoint)
  baseModel      the base model (default "Qwen/Qwen3.5-4B"; a full-weight checkpoint needs its own)
  rank           the LoRA rank (default 8, the checkpoint's)
"""

import pulumi

from pulumi_together_rl import ModelResource, ModelResourceArgs, TrainingSession, TrainingSessionArgs

config = pulumi.Config()
source = pulumi.StackReference(config.require("source"))
published = source.require_output("checkpoint_id")
pinned = config.get("checkpointId")
if pinned is None:
    pulumi.log.warn(
        "checkpointId is not set: resuming from the checkpoint the source stack published last, which moves as it "
        "trains. Pin it: pulumi config set checkpointId $(pulumi stack output -s <source> checkpoint_id)"
    )
load_optimizer = config.get_bool("loadOptimizer")

gpu = ModelResource(
    "resume-gpu",
    ModelResourceArgs(
        base_model=config.get("baseModel") or "Qwen/Qwen3.5-4B", compute_config={"num_generator_replicas": 1}
    ),
)
run = TrainingSession(
    "resume",
    TrainingSessionArgs(
        model_resource=gpu,
        resume_from_checkpoint_id=pinned or published,
        load_optimizer=True if load_optimizer is None else load_optimizer,
        lora_config={"rank": config.get_int("rank") or 8},
    ),
)

pulumi.export("resumed_from", run.resume_from_checkpoint_id)
pulumi.export("published", published)
pulumi.export("session_id", run.id)
