"""Inputs, for every face: validation for ``check``, values unknown at preview, canonical forms for ``diff``,
shape helpers. No ``pulumi.dynamic`` here: a check's verdict is a list of :class:`Failure`, a diff's a
:class:`Diff`, and each face turns them into its own types.

* ``check`` helpers validate with the resource's pydantic "validated inputs" model, turn every pydantic error
  into one :class:`Failure` per property path, and leave values that are unknown at preview untouched.
* ``diff`` helpers compare canonical forms of the real inputs only; they never make HTTP calls.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from http import HTTPStatus
from typing import Annotated, Any, NamedTuple, get_args

from pulumi.output import Unknown
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Strict,
    StringConstraints,
    ValidationError,
)

from ..client import errors
from ..messages import UNPRINTABLE, printable
from .keys import OWNER_KEY, PROVIDER_KEY, SECRETS_KEY, UNKNOWN_SENTINEL


class Failure(NamedTuple):
    """One bad input: the property path and what is wrong with it (and what to do)."""

    property: str
    reason: str


@dataclasses.dataclass(frozen=True)
class Diff:
    """What ``diff`` found: whether anything changed, and which changes replace (always delete-before-replace)."""

    changes: bool
    replaces: list[str]
    changed: list[str] = dataclasses.field(default_factory=list)
    """Every input that changed (the replacing ones among them), for a face that reports them one by one."""

    @property
    def delete_before_replace(self) -> bool | None:
        return True if self.replaces else None


# --------------------------------------------------------------------------------------- unknowns + shapes


def is_unknown(value: Any) -> bool:
    return isinstance(value, Unknown) or (isinstance(value, str) and value == UNKNOWN_SENTINEL)


def contains_unknown(value: Any) -> bool:
    if is_unknown(value):
        return True
    if isinstance(value, Mapping):
        return any(contains_unknown(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(contains_unknown(v) for v in value)
    return False


def canonical(value: Any, *, top: bool = True) -> Any:
    """The comparable form of an input: ``None`` entries dropped, whole floats as ints, and an empty object at
    the top equal to an unset input (``compute_config={}`` means the defaults). Nested empty objects are kept:
    ``{"adam": {}}`` and ``{"muon": {}}`` differ."""
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if key == PROVIDER_KEY or item is None:
                continue
            out[key] = canonical(item, top=False)
        return (out or None) if top else out
    if isinstance(value, (list, tuple)):
        return [canonical(v, top=False) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def drop_none(value: Any) -> Any:
    """``value`` without ``None`` entries (the wire drops them anyway; do it here so outputs are stable)."""
    if isinstance(value, Mapping):
        return drop_none_items(value)
    if isinstance(value, list):
        return [drop_none(v) for v in value]
    return value


def drop_none_items(props: Mapping[str, Any]) -> dict[str, Any]:
    """A property bag without ``None`` entries, at any depth (:func:`drop_none`)."""
    return {k: drop_none(v) for k, v in props.items() if v is not None}


def pick(props: Mapping[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    """The entries of ``props`` named in ``keys`` that are set."""
    return {k: props[k] for k in keys if props.get(k) is not None}


def iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def short_id(ident: str) -> str:
    return ident if len(ident) <= 12 else ident[:8] + "…"


def id_prefix(ident: str) -> str:
    """How a check failure or warning quotes an id the user declared: its first 8 characters, then ``…`` if
    there is more. Never the whole id (unlike :func:`short_id`, which keeps ids of up to 12 characters): it
    could be a secret pasted into the wrong field, and a preview can end up in a pull-request comment."""
    return printable(ident[:8]) + ("…" if len(ident) > 8 else "")


# 401/403/429 concern the key or the rate (``process.remote_check`` skips the check), 408 the network.
_NOT_ABOUT_THE_INPUT = frozenset({401, 403, 408, 429})


def answers_the_input(exc: BaseException) -> bool:
    """Whether an API error met by a remote check is an answer about what the check asked (an id, a create
    body): a 4xx other than 401, 403, 408 and 429. The check turns it into a failure of the field it was
    about (:func:`refused_at_check`, or its own words for a 404 or a 400)."""
    return (
        isinstance(exc, errors.ApiError)
        and 400 <= exc.status < 500
        and exc.status not in _NOT_ABOUT_THE_INPUT
    )


def refused_at_check(field: str, request: str, exc: errors.ApiError, todo: str) -> Failure:
    """The failure of ``field`` for an API answer about it that the check has no words of its own for (a 414,
    a 413, a 405 ...). ``request`` names the request with the id as a placeholder
    (``GET /v1/rl/model-resources/<adopt_id>``); the API's message is left out, since it may quote the id."""
    try:
        phrase = f" ({HTTPStatus(exc.status).phrase})"
    except ValueError:  # a status without a standard name
        phrase = ""
    return Failure(
        field,
        f"{field} could not be checked: the API answered HTTP {exc.status}{phrase} to {request}. {todo}",
    )


# --------------------------------------------------------------------------------------------------- check


def _whole(value: Any) -> Any:
    # Numbers cross the Pulumi wire as doubles: 32 arrives as 32.0. Take whole floats back to ints.
    return int(value) if isinstance(value, float) and value.is_integer() else value


WholeInt = Annotated[int, Strict(), BeforeValidator(_whole)]
"""An integer input: whole floats (from the wire) become ints; bools, strings and fractions are rejected."""

ID_MAX = 256
"""The longest id (and ``base_model``) check accepts. Real ids are 36-character UUIDs; a longer one cannot name
anything, and asking the API about it could only make a URL that the API or a proxy refuses (414)."""


def _no_control_characters(value: Any) -> Any:
    # Runs before the type, length and pattern checks, so this is the reason given whatever else is wrong.
    if isinstance(value, str) and UNPRINTABLE.search(value):
        raise ValueError(
            "control characters are not allowed (newlines, tabs, escape sequences and the like): remove them"
        )
    return value


def _one_path_segment(value: str) -> str:
    # The client refuses such an id before sending anything (its request path would change), which would
    # surface as an error of check itself rather than a failure of this field.
    if value in (".", "..") or "/" in value or "\\" in value:
        raise ValueError("must be one id: it cannot contain / or \\ or be . or ..")
    return value


NO_CONTROL_CHARACTERS = BeforeValidator(_no_control_characters)
"""Metadata of a text input (``Annotated[str, Strict(), StringConstraints(...), NO_CONTROL_CHARACTERS]``): no
control characters (they could rewrite the terminal or forge log lines; see ``messages.printable``). Last in
the ``Annotated``, so it runs before the type, length and pattern checks; constraints given outside it (a
``Field(max_length=...)``) would be applied to its result as to any sized value ("at most 256 items")."""

Name = Annotated[str, Strict(), NO_CONTROL_CHARACTERS]
"""Text the provider prints or the API shows (names, W&B fields): any string without control characters."""

Id = Annotated[str, Strict(), StringConstraints(min_length=1, max_length=ID_MAX), NO_CONTROL_CHARACTERS]
"""An id sent in a request body: 1 to :data:`ID_MAX` characters, no control characters."""

PathId = Annotated[Id, AfterValidator(_one_path_segment)]
"""An id check looks up by ``GET .../<id>``: an :data:`Id` that is also one path segment."""


class StrictInputs(BaseModel):
    """Base of every validated-inputs model: an unknown key is a check failure, never silently dropped."""

    model_config = ConfigDict(extra="forbid")


def validate_inputs(
    model: type[BaseModel],
    news: Mapping[str, Any],
    *,
    required: Iterable[str],
    hints: Mapping[str, str],
) -> tuple[dict[str, Any], list[Failure]]:
    """Validate ``news`` with ``model``: (normalised inputs, one failure per bad property path).

    Values unknown at preview are left out of validation and put back unchanged; a required property that is
    unknown is fine. On failure the inputs come back as given.
    """
    passed = (PROVIDER_KEY, OWNER_KEY, SECRETS_KEY)  # the faces' own keys, never the user's
    props = {k: v for k, v in news.items() if k not in passed and v is not None}
    owner, secret = news.get(OWNER_KEY), news.get(SECRETS_KEY)
    known, unknowns = _split_unknowns(props, ())
    failures: list[Failure] = []
    seen: set[str] = set()
    for name in required:
        if name not in props:
            failures.append(Failure(name, f"{name} is required. {hints.get(name, '')}".strip()))
            seen.add(name)
    try:
        validated = model.model_validate(known)
    except ValidationError as exc:
        for err in exc.errors():
            path = ".".join(str(part) for part in err["loc"])
            if path not in seen:
                seen.add(path)
                failures.append(Failure(path, _reason(err, path, hints, model)))
        return props, failures
    if failures:
        return props, failures
    inputs = drop_none_items(validated.model_dump(mode="json", exclude_unset=True))
    for where, value in unknowns:
        target = inputs
        for part in where[:-1]:
            target = target.setdefault(part, {})
        target[where[-1]] = value
    if isinstance(owner, str) and owner:
        inputs[OWNER_KEY] = owner
    if isinstance(secret, list) and secret:
        inputs[SECRETS_KEY] = secret
    return inputs, failures


def _split_unknowns(
    value: Mapping[str, Any], path: tuple[str, ...]
) -> tuple[dict[str, Any], list[tuple[tuple[str, ...], Any]]]:
    known: dict[str, Any] = {}
    unknowns: list[tuple[tuple[str, ...], Any]] = []
    for key, item in value.items():
        if contains_unknown(item) and isinstance(item, Mapping) and not is_unknown(item):
            known[key], inner = _split_unknowns(item, (*path, key))
            unknowns.extend(inner)
        elif contains_unknown(item):
            unknowns.append(((*path, key), item))
        elif item is not None:
            known[key] = item
    return known, unknowns


def _reason(err: Mapping[str, Any], path: str, hints: Mapping[str, str], model: type[BaseModel]) -> str:
    kind = err["type"]
    parent = path.rpartition(".")[0]
    if kind == "extra_forbidden":
        where = " from " + parent if parent else ""
        hint = hints.get(parent, "")
        return f"{path} is not a known input. Remove it{where} (check the spelling). {hint}".strip()
    nested = _model_at(model, err["loc"])
    if kind in ("model_type", "model_attributes_type", "dict_type") and nested is not None:
        keys = list(nested.model_fields)
        message = (
            f"should be an object with keys {', '.join(keys)}" if keys else "should be an empty object {}"
        )
    elif kind == "value_error":
        message = str(err.get("ctx", {}).get("error", ""))
    else:
        message = err["msg"]
    # Never show the names of the validation classes (_LoraConfig ...): they mean nothing to the user.
    message = re.sub(r"(?:or )?(?:an )?instance of _?[A-Z]\w*", "", message).strip().rstrip(",")
    message = message[0].lower() + message[1:] if message else "invalid value"
    hint = hints.get(path) or hints.get(parent, "")
    return f"{path}: {message} (got {shown(err.get('input'))}). {hint}".strip()


def shown(value: Any) -> str:
    """What a check failure may say of a rejected value: a number or boolean as it is, anything else by its
    shape only. A dynamic provider gets secrets in plaintext, and a key pasted into the wrong field must not be
    printed in a preview (or posted as a pull-request comment)."""
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    if isinstance(value, str):
        return f"a string of {len(value)} character{'' if len(value) == 1 else 's'}"
    if isinstance(value, Mapping):
        return f"an object with {len(value)} key{'' if len(value) == 1 else 's'}"
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)} item{'' if len(value) == 1 else 's'}"
    return f"a {type(value).__name__}"


def _model_at(model: type[BaseModel], loc: Iterable[Any]) -> type[BaseModel] | None:
    """The pydantic model validating the value at ``loc`` (None if that value is not an object)."""
    current: type[BaseModel] | None = model
    for part in loc:
        field = current.model_fields.get(str(part)) if current is not None else None
        if field is None:
            return None
        current = _inner_model(field.annotation)
    return current


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


# ---------------------------------------------------------------------------------------------------- diff


def changed_keys(olds: Mapping[str, Any], news: Mapping[str, Any], keys: Iterable[str]) -> list[str]:
    """Input keys whose value differs (canonical forms; an unknown new value always counts as a change)."""
    return [
        k for k in keys if contains_unknown(news.get(k)) or canonical(olds.get(k)) != canonical(news.get(k))
    ]


def diff_inputs(
    olds: Mapping[str, Any],
    news: Mapping[str, Any],
    *,
    replace_on_changes: tuple[str, ...],
    update_in_place: tuple[str, ...],
) -> Diff:
    """The diff over the real inputs only: never ``__provider``, never outputs or server-filled values; an
    input that becomes unknown at preview counts as a change (of its kind: replace or update)."""
    changed = changed_keys(olds, news, (*replace_on_changes, *update_in_place))
    return Diff(
        changes=bool(changed), replaces=[k for k in changed if k in replace_on_changes], changed=changed
    )
