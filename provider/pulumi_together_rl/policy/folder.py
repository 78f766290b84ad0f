"""``python -m pulumi_together_rl policy-pack <folder>``: the policy-pack folder that ``--policy-pack`` takes.

A Python policy pack is a folder with a ``PulumiPolicy.yaml`` (runtime python, and the virtualenv to run in)
and a ``__main__.py``. The rules live in this package; the folder only says which Python to start and starts
:func:`pulumi_together_rl.policy.pack.main`, so it is two small files to commit next to ``Pulumi.yaml`` (the
venv is named relative to the folder, as ``Pulumi.yaml`` names its own, so every clone can use it).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from .. import __version__

MAIN = '''"""The Together RL policy pack (pulumi_together_rl.policy): made by `python -m pulumi_together_rl policy-pack`."""

from pulumi_together_rl.policy.pack import main

main()
'''

DEFAULT_CONFIG = {
    "together-rl-budget": {"enforcementLevel": "mandatory", "max_price_per_hour": 50},
    # No cap until one is set: the account is read with the command's TOGETHER_API_KEY, which a stack that keeps
    # its key in its config does not have (the rule then fails closed).
    "together-rl-account-budget": {"enforcementLevel": "mandatory"},
    "together-rl-session-caps": {
        "enforcementLevel": "mandatory",
        "lora_sessions": 5,
        "full_weight_sessions": 1,
    },
    "together-rl-idle-ceiling": {"enforcementLevel": "mandatory", "max_inactive_timeout": 3600},
    "together-rl-keep-ceiling": {"enforcementLevel": "mandatory", "max_keep_ready_hours": 24},
    "together-rl-no-force-stop": {"enforcementLevel": "mandatory", "stacks": ["prod", "production"]},
    "together-rl-wandb-metadata": {"enforcementLevel": "advisory", "required": ["project"]},
}


def policy_yaml(venv: str) -> str:
    return (
        "# The Together RL policy pack: `pulumi preview --policy-pack <this folder> --policy-pack-config "
        "<this folder>/policy-config.json`.\n"
        "description: Together RL - budget, session caps, idle ceiling, force_stop, W&B metadata\n"
        f"version: {__version__}\n"
        "runtime:\n"
        "  name: python\n"
        "  options:\n"
        "    # The venv that has pulumi-together-rl[policy] installed, relative to this folder.\n"
        f"    virtualenv: {json.dumps(venv)}\n"
    )


def write(folder: Path, venv: Path | None = None) -> list[Path]:
    """Write the pack's files into ``folder`` (``policy-config.json`` only if absent); the written paths."""
    folder.mkdir(parents=True, exist_ok=True)
    venv = (venv or Path(sys.prefix)).resolve()
    try:
        named = os.path.relpath(venv, folder.resolve())
    except ValueError:  # another drive (Windows)
        named = str(venv)
    written = []
    for name, text in (("PulumiPolicy.yaml", policy_yaml(named)), ("__main__.py", MAIN)):
        (folder / name).write_text(text)
        written.append(folder / name)
    config = folder / "policy-config.json"
    if not config.exists():
        config.write_text(json.dumps(DEFAULT_CONFIG, indent=2) + "\n")
        written.append(config)
    return written
