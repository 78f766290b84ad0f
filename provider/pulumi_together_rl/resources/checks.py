"""What ``check`` judges the same way for every kind (each kind's own judgement is in its ``*_checks`` module).

A failure names the field and never echoes a value the user gave (an id is quoted by its first characters
only): it could be a secret pasted into the wrong field, and a preview can end up in a pull-request comment.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ..client import errors
from ..client.collections import Obj, Req
from ..client.models import Status
from . import process
from .inputs import Failure, answers_the_input, id_prefix, refused_at_check
from .kind import Kind, Props

if TYPE_CHECKING:
    from ..client.api import TogetherRL


def adoptable(
    kind: Kind[Obj, Req],
    client: TogetherRL,
    adopt_id: str,
    inputs: Props,
    *,
    declared: Callable[[Obj], tuple[Props, list[Failure]]] | None = None,
) -> list[Failure]:
    """``adopt_id`` names an object of the kind that can be adopted, whose settings match the declared ones.

    ``declared(live)`` gives the inputs to compare with (and failures of its own), for a kind whose inputs are
    not all known at preview (a session on a model resource new in the same change)."""
    name, quoted = kind.name, id_prefix(adopt_id)
    request = f"GET {kind.path}/<adopt_id>"
    try:
        live = process.lookup(client, kind.collection, adopt_id)
    except errors.NotFound:
        return [Failure("adopt_id", f"no {name} {quoted} exists ({request} answered 404). Check adopt_id, or "
                                    "remove it to create a new one")]  # fmt: skip
    except errors.ApiError as exc:
        if not answers_the_input(exc):
            raise
        return [refused_at_check("adopt_id", request, exc, f"Check adopt_id (the id of an existing {name}), or "
                                 "remove it to create a new one")]  # fmt: skip
    if live.status not in kind.adoptable:
        return [Failure("adopt_id", f"{name} {quoted} is {live.status.short}: only a {name} that is "
                                    f"{_either(kind.adoptable)} can be adopted. Remove adopt_id to create a "
                                    "new one")]  # fmt: skip
    compared, failures = declared(live) if declared is not None else (inputs, [])
    if failures:
        return failures
    mismatched = [
        m.split(" (", 1)[0] for m in kind.differences(compared, live)
    ]  # field names only: no values
    if mismatched:
        verb = "differs" if len(mismatched) == 1 else "differ"
        return [Failure("adopt_id", f"{name} {quoted} was created with other settings: "
                                    f"{_listed(mismatched, 'and')} {verb}. Declare the inputs it was created "
                                    "with, or remove adopt_id to create a new one")]  # fmt: skip
    return []


def _either(statuses: Iterable[Status]) -> str:
    return _listed(sorted(s.short for s in statuses), "or")


def _listed(words: list[str], last: str) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} {last} {words[-1]}"
