"""GitOps: a team's training environment, one stack per environment, changed only through pull requests.

Stack config (project `together-rl-gitops`, see Pulumi.dev.yaml and Pulumi.prod.yaml):
  baseModel          the base model of the shared GPU allocation
  gpuType            optional GPU type (the model's default when unset)
  generatorReplicas  generator replicas of the model resource (default 1)
  inactiveTimeout    seconds of inactivity before Together stops the resource (default 3600)
  experiments        a list of {name, rank, wandbProject?}: one training session each
  together:apiKey    the Together API key, a secret (pulumi config set --secret together:apiKey ...)
"""

import pulumi

from pulumi_together_rl import ModelResource, ModelResourceArgs, TrainingSession, TrainingSessionArgs

config = pulumi.Config()
stack = pulumi.get_stack()
base_model = config.get("baseModel") or "Qwen/Qwen3.5-4B"
gpu_type = config.get("gpuType")
replicas = config.get_int("generatorReplicas")
inactive_timeout = config.get_int("inactiveTimeout") or 3600
experiments = config.require_object("experiments")

compute_config = {"num_generator_replicas": 1 if replicas is None else replicas}
if gpu_type:
    compute_config["gpu_type"] = gpu_type

gpu = ModelResource(
    "team-gpu",
    ModelResourceArgs(
        base_model=base_model,
        lora_enabled=True,
        compute_config=compute_config,
        inactive_timeout=inactive_timeout,
    ),
)

sessions = {}
for experiment in experiments:
    name = experiment["name"]
    sessions[name] = TrainingSession(
        name,
        TrainingSessionArgs(
            model_resource=gpu,  # preview validates the session against gpu's declared inputs
            lora_config={"rank": int(experiment["rank"])},
            metadata={
                "wandb": {
                    "project": experiment.get("wandbProject", "team-rl"),
                    "group": stack,
                    "run_name": f"{stack}-{name}",
                }
            },
        ),
    )

pulumi.export("model_resource_id", gpu.id)
pulumi.export("model_resource_status", gpu.status)
pulumi.export("sessions", {name: session.id for name, session in sessions.items()})
pulumi.export("session_statuses", {name: session.status for name, session in sessions.items()})
