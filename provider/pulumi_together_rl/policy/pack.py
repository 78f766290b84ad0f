"""The Together RL policy pack: :mod:`.rules` served to the Pulumi engine through the policy SDK.

Run it with ``pulumi preview --policy-pack <folder>`` (a folder made by ``python -m pulumi_together_rl
policy-pack <folder>``, or ``examples/gitops/policy``), or point ``--policy-pack`` at the executable
``together-rl-policy-pack`` in the venv (Pulumi CLI >= 3.262). Configure it with ``--policy-pack-config
<file.json>``: ``{"<policy name>": {"enforcementLevel": "mandatory" | "advisory" | "disabled", ...}}``.

Every rule is a stack policy: it sees the whole stack (sessions grouped by the model resource they depend on,
the sum of the prices), and reports each violation against the resource it concerns.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    PolicyPack,
    ReportViolation,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

from . import rules

PACK_NAME = "together-rl"

_stack: list[str] = []  # the stack's name, as the engine's ConfigureStack gives it (see _record_the_stack)


def _plain(value: Any) -> Any:
    """The policy SDK's read-only proxy as plain dicts and lists, with :data:`rules.UNKNOWN` for a value
    unknown at preview (the proxy raises on reading one, which would skip the whole rule)."""
    if isinstance(value, Mapping):
        out = {}
        for key in value:
            try:
                out[key] = _plain(value[key])
            except UnknownValueError:
                out[key] = rules.UNKNOWN
        return out
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        items = []
        for index in range(len(value)):
            try:
                items.append(_plain(value[index]))
            except UnknownValueError:
                items.append(rules.UNKNOWN)
        return items
    return value


def _items(args: StackValidationArgs) -> list[rules.Item]:
    """The stack's model resources and sessions, of either face (the plugin's in the core's names)."""
    items = []
    for r in args.resources:
        plugin = r.resource_type in rules.PLUGIN_TYPES
        if not plugin and r.resource_type not in (rules.MODEL_RESOURCE, rules.TRAINING_SESSION):
            continue
        props = _plain(r.props)
        depends_on = {k: [d.urn for d in v] for k, v in r.property_dependencies.items()}
        items.append(
            rules.Item(
                urn=r.urn,
                name=r.name,
                type=rules.PLUGIN_TYPES.get(r.resource_type, r.resource_type),
                props=rules.in_core_names(props) if plugin else props,
                depends_on=rules.in_core_names(depends_on) if plugin else depends_on,
            )
        )
    return items


def _stack_name() -> str | None:
    return _stack[0] if _stack else os.environ.get("PULUMI_STACK") or None


def _policy(
    name: str,
    description: str,
    rule: Callable[[list[rules.Item], Mapping[str, Any]], list[rules.Violation]],
    schema: dict[str, dict[str, Any]],
) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report: ReportViolation) -> None:
        for message, urn in rule(_items(args), args.get_config()):
            report(message, urn)

    return StackValidationPolicy(
        name=name,
        description=description,
        validate=validate,
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=PolicyConfigSchema(properties=schema),
    )


def _budget(items: list[rules.Item], config: Mapping[str, Any]) -> list[rules.Violation]:
    # The total is reported even when under the budget: a line on stderr, which the engine shows under the
    # policy pack's name (a policy can only otherwise speak through violations).
    print(f"{PACK_NAME}: {rules.price_summary(items)}", file=sys.stderr, flush=True)
    return rules.budget(items, config)


def _account_budget(items: list[rules.Item], config: Mapping[str, Any]) -> list[rules.Violation]:
    # The account is read with the pulumi command's TOGETHER_API_KEY / TOGETHER_BASE_URL (the pack never sees
    # the stack's secrets), once, and only when there is a cap and a new model resource to judge; its line is
    # said beside the stack's total.
    from ..resources import spend

    def account() -> Any:
        read = spend.account()
        stack = rules.stack_of(items)
        if read.unread is None and stack is not None:
            print(f"{PACK_NAME}: {spend.line(spend.split(read.objects, stack))}", file=sys.stderr, flush=True)
        return read

    return rules.account_budget(items, config, account)


_STACKS = {"type": "array", "items": {"type": "string"}}


def policies() -> list[Policy]:
    return [
        _policy(
            "together-rl-budget",
            "The stack's total estimated price per hour is at most the budget (max_price_per_hour).",
            _budget,
            {"max_price_per_hour": {"type": "number", "exclusiveMinimum": 0}},
        ),
        _policy(
            "together-rl-account-budget",
            "The account's estimated price per hour after this change (the API key's user's active model "
            "resources plus the new ones) is at most max_account_price_per_hour.",
            _account_budget,
            {"max_account_price_per_hour": {"type": "number", "exclusiveMinimum": 0}},
        ),
        _policy(
            "together-rl-session-caps",
            "No model resource has more training sessions declared on it than it takes.",
            rules.session_caps,
            {
                "lora_sessions": {"type": "integer", "minimum": 1, "default": 5},
                "full_weight_sessions": {"type": "integer", "minimum": 1, "default": 1},
                "lora_sessions_by_model": {"type": "object", "additionalProperties": {"type": "integer"}},
            },
        ),
        _policy(
            "together-rl-idle-ceiling",
            "Every model resource stops itself after at most max_inactive_timeout idle seconds.",
            rules.idle_ceiling,
            {"max_inactive_timeout": {"type": "integer", "minimum": 300, "default": 3600}},
        ),
        _policy(
            "together-rl-keep-ceiling",
            "No model resource is kept READY (keep_ready_until) more than max_keep_ready_hours ahead.",
            rules.keep_ceiling,
            {"max_keep_ready_hours": {"type": "number", "exclusiveMinimum": 0, "default": 24}},
        ),
        _policy(
            "together-rl-no-force-stop",
            "force_stop is not set on the stacks listed in stacks (default prod, production).",
            lambda items, config: rules.no_force_stop(items, config, _stack_name()),
            {"stacks": _STACKS},
        ),
        _policy(
            "together-rl-wandb-metadata",
            "Every training session carries the W&B metadata keys listed in required (on stacks, if given).",
            lambda items, config: rules.wandb_metadata(items, config, _stack_name()),
            {"required": _STACKS, "stacks": _STACKS},
        ),
    ]


def _record_the_stack() -> None:
    """Learn the stack's name from the engine's ``ConfigureStack`` call.

    pulumi-policy (1.21) receives the stack in ``ConfigureStack`` but keeps only its tags, and the engine no
    longer passes ``PULUMI_STACK`` to a pack it starts through the language host. This wraps that one method of
    the SDK's (private) analyzer servicer to record ``request.stack``; if the method is not there (another
    version), it warns and the rules fall back to ``PULUMI_STACK``. Upstream fix: expose the stack on
    ``StackValidationArgs`` (pulumi-policy).
    """
    from pulumi_policy import policy as sdk

    servicer = getattr(sdk, "_PolicyAnalyzerServicer", None)
    original = getattr(servicer, "ConfigureStack", None)
    if servicer is None or original is None:
        print(f"{PACK_NAME}: warning: this pulumi-policy has no ConfigureStack to learn the stack's name "
              "from; the stack-specific rules use PULUMI_STACK", file=sys.stderr)  # fmt: skip
        return

    def configure_stack(self: Any, request: Any, context: Any) -> Any:
        if getattr(request, "stack", ""):
            _stack[:] = [request.stack]
        return original(self, request, context)

    servicer.ConfigureStack = configure_stack


def _report_the_version() -> None:
    """Answer the engine with this package's version, as the folder's ``PulumiPolicy.yaml`` does.

    pulumi-policy (1.21) hands its (private) analyzer servicer a fixed ``0.0.1``, which the engine shows for a
    pack started as an executable (a folder's ``PulumiPolicy.yaml`` names the version instead). This wraps the
    servicer's constructor to pass :data:`~pulumi_together_rl.__version__`, the one version both ways report;
    without that constructor (another version), it warns and the SDK's stays. Upstream fix: a ``version``
    argument of ``PolicyPack``.
    """
    from pulumi_policy import policy as sdk

    from .. import __version__

    servicer = getattr(sdk, "_PolicyAnalyzerServicer", None)
    original = getattr(servicer, "__init__", None)
    if servicer is None or original is None or original is object.__init__:
        print(f"{PACK_NAME}: warning: this pulumi-policy has no analyzer servicer to give the pack's version "
              f"({__version__}) to", file=sys.stderr)  # fmt: skip
        return

    def init(self: Any, name: str, version: str, *args: Any, **kwargs: Any) -> None:
        original(self, name, __version__, *args, **kwargs)

    servicer.__init__ = init


def _unbuffered_stdout() -> None:
    """Make the port the pack prints reach the engine at once.

    pulumi-policy (1.21) writes the port the engine waits for to ``sys.stdout.buffer`` and never flushes it. The
    language host runs a folder's pack with ``python -u``; started as an executable (``together-rl-policy-pack``)
    with its stdout a pipe, the port stayed in the buffer and ``pulumi preview --policy-pack`` waited forever
    ("Loading policy packs...") unless the user's environment had PYTHONUNBUFFERED. This puts an unbuffered binary
    layer under stdout, as ``-u`` does. Upstream fix: a flush after the write (pulumi-policy).
    """
    if not sys.stdout.isatty():
        sys.stdout.flush()
        sys.stdout = io.TextIOWrapper(
            io.FileIO(sys.stdout.fileno(), "w", closefd=False),  # type: ignore[arg-type] # what -u does
            encoding=sys.stdout.encoding,
            errors=sys.stdout.errors,
            write_through=True,
        )


def main() -> None:
    """Serve the pack (blocks): what the engine starts, by folder or as ``together-rl-policy-pack``."""
    _unbuffered_stdout()
    _record_the_stack()
    _report_the_version()
    PolicyPack(name=PACK_NAME, policies=policies(), enforcement_level=EnforcementLevel.MANDATORY)
