"""A tiny Pulumi program for the stand-in engine's own tests: two Things, the second wired to the first."""

import pulumi
from harness.dummy_provider import Thing

config = pulumi.Config()

base = Thing("base", label="base", size=config.get_int("size") or 1, note=config.get("note"))
child = Thing("child", label=base.label.apply(lambda label: f"{label}-child"), parent_id=base.id)

pulumi.export("base_id", base.id)
pulumi.export("base_serial", base.serial)
pulumi.export("base_size", base.size)
pulumi.export("child_id", child.id)
pulumi.export("child_parent", child.parent_id)
pulumi.export("child_label", child.label)
pulumi.export("greeting", base.greeting)
