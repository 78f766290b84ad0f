"""The names every face and the core share for what the state holds beside the API's own fields, and the one
API limit a declaration applies itself. Plain constants: the program side imports them (and nothing heavy)."""

import re

PROVIDER_KEY = "__provider"
"""Where ``pulumi.dynamic`` keeps the pickled provider in every state."""

OWNER_KEY = "owner"
"""The declaration a resource belongs to (``org/project/stack/name``), set by the resource class from the
program, never by the user: the create journal's proof of whose an interrupted create was. Passed through
``check`` unvalidated and ignored by ``diff``."""

SECRETS_KEY = "secret_inputs"
"""The names of the top-level inputs that arrived secret: set by the dynamic face's resource classes from the
program (which ``Output`` values are secret: the engine hands a dynamic provider every value in plain text) and by
the plugin face from the request's secret markers. Passed through ``check`` unvalidated, ignored by ``diff``,
never an output: what lines, failures and the create journal must show as ``[secret]``
(:mod:`.secrecy`)."""

SPEC_KEY = "model_resource_spec"
"""Set by a training session given ``model_resource=``: that resource's declared ``base_model``,
``compute_config`` and ``lora_enabled``, for check to validate against while its id is unknown. Diff never looks
at it (a change of the resource replaces it, so its id changes)."""

UNKNOWN_SENTINEL = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
"""How the engine writes a value it does not know yet (``pulumi.runtime.rpc.UNKNOWN``, without importing rpc):
what a face hands the core for it, and answers with for it."""

DISPLAY_NAME_MAX = 128
"""The longest ``display_name`` the API takes (a default taken from the Pulumi resource name is cut to it)."""


def camel(snake: str) -> str:
    """A core name in Pulumi's camelCase, as the plugin face shows it: ``num_generator_replicas`` ->
    ``numGeneratorReplicas``."""
    head, *rest = snake.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def snake(name: str) -> str:
    """The inverse of :func:`camel` for every name of the schema (a test holds the round trip)."""
    return re.sub(r"(?<!^)([A-Z])", lambda m: "_" + m.group(1).lower(), name)
