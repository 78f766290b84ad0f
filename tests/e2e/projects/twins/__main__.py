"""N identical model resources (config ``count``, default 2): twins whose creates only their names tell apart."""

import pulumi

from pulumi_together_rl import ModelResource, ModelResourceArgs

count = pulumi.Config().get_int("count") or 2
gpus = [ModelResource(f"gpu-{i}", ModelResourceArgs(base_model="Qwen/Qwen3.5-4B")) for i in range(count)]
pulumi.export("ids", [gpu.id for gpu in gpus])
