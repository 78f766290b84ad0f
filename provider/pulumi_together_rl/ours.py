"""What is ours, in one table: the type tokens and config namespaces of both faces, and how a declaration (the
resource that asked for a create) is named. The orphan finder reads it to know which resources of a stack state
are Together objects and which pending creates may be making one; the policy pack to know which resources it
judges; the create journal's owner matching to know which stack an entry names.

A *declaration* is one resource of one stack: ``org/project/stack/name`` (the ``owner`` output). The dynamic face
learns the organization from the program (``pulumi.get_organization()``: the literal ``organization`` for every
self-managed backend); the plugin face is never told it and writes ``-``. Which backend the stack lives in is
recorded beside the owner (:mod:`.backend`), never in it: the owner is an output of existing stacks.
"""

from __future__ import annotations

import dataclasses

MODEL_RESOURCE = "model resource"
TRAINING_SESSION = "training session"
KINDS = (MODEL_RESOURCE, TRAINING_SESSION)
"""The kinds, by the names the core gives them (``Kind.name``)."""

UNKNOWN_ORG = "-"
"""The organization of a declaration whose face is never told it (the plugin face)."""


@dataclasses.dataclass(frozen=True)
class Face:
    """One face's names: what its resources, provider and settings are called in a stack."""

    name: str
    config: str
    """The config namespace of the provider settings: ``<config>:apiKey``, ``<config>:baseUrl``."""
    types: dict[str, str]
    """Kind -> the resource type token in a stack's state."""
    provider_type: str
    """The type of its provider resource in a state (``pulumi:providers:<package>``)."""

    def config_key(self, setting: str) -> str:
        """``apiKey`` -> ``together:apiKey``."""
        return f"{self.config}:{setting}"


DYNAMIC = Face(
    name="dynamic",
    config="together",
    types={
        MODEL_RESOURCE: "pulumi-python:dynamic/together:ModelResource",
        TRAINING_SESSION: "pulumi-python:dynamic/together:TrainingSession",
    },
    provider_type="pulumi:providers:pulumi-python",
)

PLUGIN = Face(
    name="plugin",
    config="together-rl",
    types={
        MODEL_RESOURCE: "together-rl:index:ModelResource",
        TRAINING_SESSION: "together-rl:index:TrainingSession",
    },
    provider_type="pulumi:providers:together-rl",
)

FACES = (DYNAMIC, PLUGIN)

SETTINGS = ("apiKey", "baseUrl", "pollInterval", "journalUrl", "maxAccountPricePerHour")
"""Every provider setting, by its name in either face's config namespace (``together:maxAccountPricePerHour``,
``together-rl:maxAccountPricePerHour``): :mod:`.config` reads the dynamic face's keys, the plugin's schema
describes its own, and a test holds the three equal."""

KIND_OF_TYPE = {token: kind for face in FACES for kind, token in face.types.items()}
"""Every type token of ours -> its kind."""


def kind_of(type_token: str) -> str | None:
    """The kind of a resource type token, None when it is not one of ours."""
    return KIND_OF_TYPE.get(type_token)


def config_keys(setting: str) -> tuple[str, ...]:
    """``apiKey`` -> every face's key of that setting: (``together:apiKey``, ``together-rl:apiKey``)."""
    return tuple(face.config_key(setting) for face in FACES)


def owner(org: str | None, project: str, stack: str, name: str) -> str:
    """A declaration's name: ``org/project/stack/name`` (``-`` for an organization nobody told us)."""
    return f"{org or UNKNOWN_ORG}/{project}/{stack}/{name}"


@dataclasses.dataclass(frozen=True)
class Owner:
    """A declaration's name, read back."""

    org: str | None
    """None: not known (:data:`UNKNOWN_ORG`)."""
    project: str
    stack: str
    name: str

    @property
    def stack_name(self) -> str:
        """``org/project/stack``, as the CLI fully qualifies it (``-`` for an unknown organization)."""
        return f"{self.org or UNKNOWN_ORG}/{self.project}/{self.stack}"


def parse_owner(text: str | None) -> Owner | None:
    """The parts of an owner written by :func:`owner`; None for anything else."""
    if not text:
        return None
    parts = text.split("/", 3)
    if len(parts) != 4 or not all(parts):
        return None
    org, project, stack, name = parts
    return Owner(None if org == UNKNOWN_ORG else org, project, stack, name)
