"""Mistakes a user's type checker must catch. tests/typing/test_user_program.py runs ``mypy --strict`` on this
file and expects, for each ``# E: <text>`` comment, an error containing that text on the next line that is not
a comment, and no error anywhere else. Never run, only type-checked; ruff- and ruff-format-clean as it stands.
"""

from __future__ import annotations

import pulumi

import pulumi_together_rl
from pulumi_together_rl import (
    LoraConfigArgs,
    ModelResource,
    ModelResourceArgs,
    TrainingSession,
    TrainingSessionArgs,
)

gpu = ModelResource(
    "gpu",
    ModelResourceArgs(
        base_model="Qwen/Qwen3.5-4B",
        # E: Argument "compute_config" to "ModelResourceArgs" has incompatible type "dict[str, str]"
        compute_config={"gpu": "H100-80GB"},
        # E: Argument "inactive_timeout" to "ModelResourceArgs" has incompatible type "str"
        inactive_timeout="3600",
    ),
)
# E: Missing positional argument "base_model" in call to "ModelResourceArgs"
no_model = ModelResourceArgs(lora_enabled=True)

bad_rank = TrainingSessionArgs(
    model_resource=gpu,
    # E: Argument "lora_config" to "TrainingSessionArgs" has incompatible type "dict[str, str]"
    lora_config={"rank": "8"},
)
# (mypy reports a misspelled keyword at the call, not at the keyword)
# E: Unexpected keyword argument "display_nam" for "TrainingSessionArgs"
misspelled = TrainingSessionArgs(model_resource=gpu, display_nam="trial")
bad_wandb = TrainingSessionArgs(
    model_resources_id=gpu.id,
    # E: Argument "metadata" to "TrainingSessionArgs" has incompatible type "dict[str, dict[str, int]]"
    metadata={"wandb": {"project": 3}},
)
# E: Argument "model_resource" to "TrainingSessionArgs" has incompatible type "str"
by_id_string = TrainingSessionArgs(model_resource="mr-123")
# E: Extra key "alpah" for TypedDict "LoraConfigArgs"
lora: LoraConfigArgs = {"rank": 8, "alpah": 16}
# E: TypedDict item "seed" has type "int | Awaitable[int] | Output[int]"
seeded: LoraConfigArgs = {"seed": "7"}

# E: expression has type "Output[str]", variable has type "Output[int]"
replicas: pulumi.Output[int] = gpu.status
# E: "ModelResource" has no attribute "stauts"
typo = gpu.stauts
# E: expression has type "ModelResource", variable has type "TrainingSession"
session: TrainingSession = ModelResource.get("other", "mr-1")
# A misspelled name: the package's lazy exports (a module __getattr__ at run time) must not make every name exist.
# E: Module has no attribute "TrainingSesion"
misspelled_class = pulumi_together_rl.TrainingSesion
