"""Both faces in one program: the plugin's ModelResource and TrainingSession through the generated SDK, and a
dynamic TrainingSession on the same model resource.

Stack config: the plugin's settings are ``together-rl:apiKey`` / ``together-rl:baseUrl``, the dynamic
resources' ``together:apiKey`` / ``together:baseUrl`` (each falls back to TOGETHER_API_KEY / TOGETHER_BASE_URL).
"""

import pulumi
import pulumi_together_rl_sdk as together_rl

from pulumi_together_rl import TrainingSession, TrainingSessionArgs

BASE_MODEL = "Qwen/Qwen3.5-4B"

# The plugin face: camelCase on the wire, snake_case in Python, the SDK's typed Args.
gpu = together_rl.ModelResource(
    "gpu",
    base_model=BASE_MODEL,
    compute_config=together_rl.ComputeConfigArgs(num_generator_replicas=1),
)
plugin_run = together_rl.TrainingSession(
    "plugin-run", model_resources_id=gpu.id, lora_config=together_rl.LoraConfigArgs(rank=8)
)

# The dynamic face on the same GPU, by id (a dynamic session's model_resource= takes a dynamic ModelResource).
dynamic_run = TrainingSession(
    "dynamic-run", TrainingSessionArgs(model_resources_id=gpu.id, lora_config={"rank": 16})
)

price = together_rl.estimate_cost_output(base_model=BASE_MODEL, compute_config={"num_generator_replicas": 1})

pulumi.export("model_resource_id", gpu.id)
pulumi.export("price_per_hour", gpu.price_per_hour)
pulumi.export("estimated_price_per_hour", price.price_per_hour)
pulumi.export("session_ids", [plugin_run.id, dynamic_run.id])
