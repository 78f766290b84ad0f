"""The plugin's property bags and the core's plain dicts, both ways, following the package schema.

The engine speaks Pulumi's camelCase and :class:`PropertyValue`; the core speaks the API's snake_case and plain
values. A key is renamed only where the schema names it (a property of a resource or of an object type): the keys
of a free map (``adam``'s settings, what the API reports in ``policyState``) are the user's or the API's and pass
unchanged. Numbers arrive as floats; an ``integer`` property gets an ``int``. An unknown value (the engine's
sentinel string) passes through as the core expects it, and is answered as the same string, which the engine
reads as unknown again (the SDK's ``PropertyValue.marshal`` has no branch for ``Computed``).

Secrets: a top-level property that arrived secret (or holds a secret) is answered secret, and so is every
property the schema marks ``secret``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pulumi.provider.experimental.property_value import Computed, PropertyValue

from .. import ours
from ..resources.keys import UNKNOWN_SENTINEL, camel, snake
from .package_schema import PACKAGE, package_schema

Spec = Mapping[str, Any]


def resource_spec(token: str) -> dict[str, Any]:
    """A resource's properties, inputs and outputs together (check answers inputs with outputs among them)."""
    res = package_schema()["resources"][token]
    return {"type": "object", "properties": {**res["properties"], **res["inputProperties"]}}


def to_core(spec: Spec, bag: Mapping[str, PropertyValue]) -> tuple[dict[str, Any], set[str]]:
    """(the bag as the core's plain snake_case dict, the snake names of its top-level secrets)."""
    props = _resolved(spec)["properties"]
    plain: dict[str, Any] = {}
    secrets: set[str] = set()
    for key, value in bag.items():
        name = snake(key) if key in props else key
        plain[name] = _plain(props.get(key), value)
        if value.contains_secret():
            secrets.add(name)
    return plain, secrets


def to_wire(spec: Spec, plain: Mapping[str, Any], secrets: Iterable[str] = ()) -> dict[str, PropertyValue]:
    """The core's dict as a property bag (None values left out)."""
    props = _resolved(spec)["properties"]
    hidden = set(secrets)
    bag: dict[str, PropertyValue] = {}
    for name, value in plain.items():
        if value is None:
            continue
        key = camel(name) if camel(name) in props else name
        sub = props.get(key)
        bag[key] = _value(sub, value).with_secret(name in hidden or bool(sub and sub.get("secret")))
    return bag


def path(name: str) -> str:
    """A core field path (``compute_config.num_generator_replicas``) in the schema's names."""
    return ".".join(camel(part) for part in name.split("."))


def in_words(text: str) -> str:
    """A sentence of the core with every property name it mentions in the schema's names (``max_price_per_hour``
    reads ``maxPricePerHour``) and the stack config keys in the plugin's namespace (``together:apiKey`` reads
    ``together-rl:apiKey``): the plugin's user never wrote the dynamic face's."""
    text = _CONFIG.sub(lambda m: f"{PACKAGE}:{m.group(1)}", text)
    return names().sub(lambda m: camel(m.group(0)), text)


_CONFIG = re.compile(r"(?<![\w-])together:(" + "|".join(ours.SETTINGS) + r")\b")


@functools.cache
def names() -> re.Pattern[str]:
    """Every snake_case name of the schema, for :func:`in_words`."""
    schema = package_schema()
    found: set[str] = set()
    for res in schema["resources"].values():
        found.update(res["inputProperties"], res["properties"])
    for obj in schema["types"].values():
        found.update(obj["properties"])
    snakes = sorted((snake(n) for n in found if snake(n) != n), key=len, reverse=True)
    return re.compile(r"(?<![\w/.-])(?:" + "|".join(map(re.escape, snakes)) + r")(?![\w])")


def _resolved(spec: Spec | None) -> Spec:
    if spec and "$ref" in spec and spec["$ref"].startswith("#/types/"):
        return package_schema()["types"][spec["$ref"].removeprefix("#/types/")]
    return spec or {}


def _plain(spec: Spec | None, value: PropertyValue) -> Any:
    inner = value.value
    spec = _resolved(spec)
    if isinstance(inner, Computed):
        return UNKNOWN_SENTINEL
    if isinstance(inner, (list, tuple)):
        return [_plain(spec.get("items"), item) for item in inner]
    if isinstance(inner, Mapping):
        if "properties" in spec:
            props = spec["properties"]
            return {(snake(k) if k in props else k): _plain(props.get(k), v) for k, v in inner.items()}
        return {k: _plain(spec.get("additionalProperties"), v) for k, v in inner.items()}
    if isinstance(inner, float) and spec.get("type") == "integer" and inner.is_integer():
        return int(inner)
    return inner


def _value(spec: Spec | None, value: Any) -> PropertyValue:
    spec = _resolved(spec)
    if isinstance(value, Mapping):
        props = spec.get("properties")
        if props is not None:
            return PropertyValue(
                {
                    (camel(k) if camel(k) in props else k): _value(props.get(camel(k)), v)
                    for k, v in value.items()
                    if v is not None
                }
            )
        return PropertyValue(
            {k: _value(spec.get("additionalProperties"), v) for k, v in value.items() if v is not None}
        )
    if isinstance(value, (list, tuple)):
        return PropertyValue([_value(spec.get("items"), v) for v in value])
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return PropertyValue(value)
    if isinstance(value, (int, float)):
        return PropertyValue(float(value))
    return PropertyValue(str(value))
