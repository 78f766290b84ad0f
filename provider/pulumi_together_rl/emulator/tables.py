"""The emulated API's fixed tables: statuses, kinds, limits, the built-in supported models, prices, and the
error codes with their default messages. Plain data, no logic.
"""

from __future__ import annotations

import re
from typing import Any

R_PENDING = "MODEL_RESOURCES_STATUS_PENDING"
R_CREATING = "MODEL_RESOURCES_STATUS_CREATING"
R_READY = "MODEL_RESOURCES_STATUS_READY"
R_ERROR = "MODEL_RESOURCES_STATUS_ERROR"
R_STOPPED = "MODEL_RESOURCES_STATUS_STOPPED"
R_STOPPING = "MODEL_RESOURCES_STATUS_STOPPING"
RESOURCE_STATUSES = (R_PENDING, R_CREATING, R_READY, R_ERROR, R_STOPPED, R_STOPPING)

S_CREATING = "TRAINING_SESSION_STATUS_CREATING"
S_RUNNING = "TRAINING_SESSION_STATUS_RUNNING"
CK_TRAINING = "CHECKPOINT_TYPE_TRAINING"
CK_INFERENCE = "CHECKPOINT_TYPE_INFERENCE"
S_STOPPED = "TRAINING_SESSION_STATUS_STOPPED"
S_STOPPING = "TRAINING_SESSION_STATUS_STOPPING"
S_ERROR = "TRAINING_SESSION_STATUS_ERROR"
S_EXPIRED = "TRAINING_SESSION_STATUS_EXPIRED"
#: The list filter accepts these (UNSPECIFIED is only a proto default).
SESSION_STATUSES = (S_CREATING, S_RUNNING, S_STOPPED, S_STOPPING, S_ERROR, S_EXPIRED)

#: Sessions that occupy a slot on their resource (and block a stop without force).
SESSION_HOLDS_SLOT = frozenset({S_CREATING, S_RUNNING, S_STOPPING})
SESSION_TERMINAL = frozenset({S_STOPPED, S_ERROR, S_EXPIRED})
RESOURCE_TERMINAL = frozenset({R_STOPPED, R_ERROR})

RESOURCE_KIND = "model_resource"
SESSION_KIND = "training_session"

GPU_TYPES = ("H100-80GB", "B200-SXM")  # what a ModelResources object may report
CREATE_GPU_TYPES = ("B200-SXM",)  # the only GPU type the API accepts on create today
#: The only GPU type the SDK's RlSupportedModel accepts (``default_gpu_type`` and ``compute_configs[].gpu_type``
#: are ``Literal["B200-SXM"]`` in together 3.1.1), so a custom supported-models table is held to it: a table
#: naming H100-80GB would make ``GET /v1/rl/supported-models`` unreadable by the SDK.
SUPPORTED_MODEL_GPU_TYPES = ("B200-SXM",)
MUON_STRATEGIES = (
    "MUON_SCALING_STRATEGY_UNSPECIFIED",
    "MUON_SCALING_STRATEGY_MATCH_ADAM",
    "MUON_SCALING_STRATEGY_ORIGINAL",
)
BASE_WEIGHTS_REF = re.compile(r"^together://ml_[A-Za-z0-9]+(@rv_[A-Za-z0-9]+)?$")
WANDB_KEYS = ("entity", "project", "group", "run_id", "run_name", "url")

INACTIVE_TIMEOUT_DEFAULT = 3600
INACTIVE_TIMEOUT_RANGE = (300, 86400)
EXTEND_RANGE = (60, 86400)
LIMIT_RANGE = (1, 100)
LIMIT_DEFAULT = 20
DISPLAY_NAME_MAX = 128
LORA_RANK_MAX = 64
LORA_ALPHA_RANGE = (1, 128)
LORA_DEFAULTS = {"rank": 32, "alpha": 64, "dropout": 0.0, "train_unembed": True}
#: Retry-After (seconds) of a session-cap 429 when no slot is about to free up.
CAP_RETRY_AFTER = 30

_SAMPLING = {"logprobs": 1, "max_tokens": 100, "n": 1, "temperature": 1.0}
#: The built-in `GET /v1/rl/supported-models` table (used while settings.supported_models is null).
BUILTIN_SUPPORTED_MODELS: list[dict[str, Any]] = [
    {
        "base_model": "Qwen/Qwen3.5-4B",
        "default_gpu_type": "B200-SXM",
        "compute_configs": [
            {
                "gpu_type": "B200-SXM",
                "generator_config": {"context_length": 32768, "sampling_defaults": dict(_SAMPLING)},
                "trainer_config": {
                    "lora": {"max_batch_size": 64, "max_rank": 64, "max_seq_length": 32768},
                    "full": {"max_batch_size": 32, "max_seq_length": 16384},
                },
            }
        ],
    },
    {
        "base_model": "Qwen/Qwen3.5-35B-A3B",
        "default_gpu_type": "B200-SXM",
        "compute_configs": [
            {
                "gpu_type": "B200-SXM",
                "generator_config": {"context_length": 65536, "sampling_defaults": dict(_SAMPLING)},
                "trainer_config": {"lora": {"max_batch_size": 32, "max_rank": 32, "max_seq_length": 32768}},
            }
        ],
    },
    {
        # Trainer only (SFT/DPO): no generator_config, so num_generator_replicas must be 0.
        "base_model": "Qwen/Qwen3-0.6B",
        "default_gpu_type": "B200-SXM",
        "compute_configs": [
            {
                "gpu_type": "B200-SXM",
                "trainer_config": {
                    "lora": {"max_batch_size": 128, "max_rank": 64, "max_seq_length": 16384},
                    "full": {"max_batch_size": 64, "max_seq_length": 16384},
                },
            }
        ],
    },
]

#: estimate-cost: on-demand USD per GPU-hour, and GPUs per part of a resource (unknown models: 1 GPU each).
GPU_PRICE_PER_HOUR = {"B200-SXM": 5.50, "H100-80GB": 3.25}
MODEL_GPUS = {
    "Qwen/Qwen3.5-4B": {"trainer_lora": 1, "trainer_full": 2, "generator": 1},
    "Qwen/Qwen3.5-35B-A3B": {"trainer_lora": 4, "trainer_full": 8, "generator": 2},
    "Qwen/Qwen3-0.6B": {"trainer_lora": 1, "trainer_full": 1, "generator": 1},
}

#: The error codes each kind's ``error.code`` may carry (the SDK's ModelResourcesErrorCode / SessionErrorCode
#: enums): ``fail-next`` refuses any other code, which the SDK could not parse.
ERROR_CODES = {
    "model_resource": (
        "MODEL_RESOURCES_ERROR_CODE_CAPACITY_WAIT_TIMEOUT",
        "MODEL_RESOURCES_ERROR_CODE_PROVISIONING_FAILED",
        "MODEL_RESOURCES_ERROR_CODE_RESOURCE_UNAVAILABLE",
    ),
    "training_session": (
        "TRAINING_SESSION_ERROR_CODE_RESOURCE_UNAVAILABLE",
        "TRAINING_SESSION_ERROR_CODE_RESOURCE_AT_CAPACITY",
        "TRAINING_SESSION_ERROR_CODE_TIMED_OUT",
        "TRAINING_SESSION_ERROR_CODE_SESSION_FAILED",
    ),
}

DEFAULT_ERROR_MESSAGES = {
    "MODEL_RESOURCES_ERROR_CODE_CAPACITY_WAIT_TIMEOUT": (
        "No GPU capacity became available for the model resource in time."
    ),
    "MODEL_RESOURCES_ERROR_CODE_PROVISIONING_FAILED": "The model resource could not be provisioned.",
    "MODEL_RESOURCES_ERROR_CODE_RESOURCE_UNAVAILABLE": "The model resource became unavailable.",
    "TRAINING_SESSION_ERROR_CODE_RESOURCE_UNAVAILABLE": (
        "The session could not start because the selected resource is unavailable."
    ),
    "TRAINING_SESSION_ERROR_CODE_RESOURCE_AT_CAPACITY": (
        "The session could not start because the selected resource has no available capacity."
    ),
    "TRAINING_SESSION_ERROR_CODE_TIMED_OUT": "The session did not start in time.",
    "TRAINING_SESSION_ERROR_CODE_SESSION_FAILED": "The session failed.",
}
SESSION_RESOURCE_LOST_CODE = "TRAINING_SESSION_ERROR_CODE_RESOURCE_UNAVAILABLE"
