"""Exports what the checkpoint functions answer for the session named in the stack config."""

import pulumi

from pulumi_together_rl import get_checkpoints, latest_checkpoint

config = pulumi.Config()
session = config.require("session")
pulumi.export("all", get_checkpoints(session_id=session))
pulumi.export("inference", get_checkpoints(session_id=session, type="inference"))
pulumi.export("latest", latest_checkpoint(session_id=session, min_step=config.get_int("min_step") or 0))
