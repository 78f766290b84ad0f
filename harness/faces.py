"""The two faces a CLI scenario runs against: the dynamic resources (a Python program) and the plugin (a Pulumi
YAML program naming the plugin folder). A :class:`Face` is what a test needs to tell them apart, and nothing else:
the config namespace, the resource type tokens, how to find its provider processes, and which project of a
scenario is its program.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECTS = ROOT / "tests" / "e2e" / "projects"


@dataclasses.dataclass(frozen=True)
class Face:
    name: str
    config: str
    """The config namespace of the provider settings (``<config>:apiKey``, ``<config>:baseUrl``)."""
    type_prefix: str
    """What its resources' type tokens start with (followed by ``ModelResource`` / ``TrainingSession``)."""
    process_mark: bytes
    """What its provider processes' command lines hold."""
    projects: dict[str, Path]
    """Scenario name -> its program for this face."""
    needs_yaml_host: bool = False
    camel_case: bool = False
    """Whether its properties (and so its messages) are camelCase (``loraConfig.rank``)."""

    def project(self, scenario: str) -> Path:
        return self.projects[scenario]

    def token(self, kind: str) -> str:
        return f"{self.type_prefix}{kind}"

    def field(self, path: str) -> str:
        """A core field path (``lora_config.rank``) as this face's messages name it."""
        if not self.camel_case:
            return path
        from pulumi_together_rl.resources.keys import camel

        return ".".join(camel(part) for part in path.split("."))

    def __str__(self) -> str:
        return self.name


DYNAMIC = Face(
    name="dynamic",
    config="together",
    type_prefix="pulumi-python:dynamic/together:",
    process_mark=b"pulumi.dynamic",
    projects={
        "sweep": ROOT / "examples" / "sweep",
        "on-demand": ROOT / "examples" / "on-demand",
        "secret-names": PROJECTS / "secret-names",
        "deadline": PROJECTS / "deadline",
    },
)

PLUGIN = Face(
    name="plugin",
    config="together-rl",
    type_prefix="together-rl:index:",
    process_mark=b"pulumi_together_rl/plugin",
    projects={
        "sweep": PROJECTS / "sweep-yaml",
        "yaml": ROOT / "examples" / "yaml",
        "on-demand": PROJECTS / "on-demand-yaml",
        "secret-names": PROJECTS / "secret-names-yaml",
        "deadline": PROJECTS / "deadline-yaml",
    },
    needs_yaml_host=True,
    camel_case=True,
)

FACES = (DYNAMIC, PLUGIN)
