"""Inputs that arrived secret stay secret in what the provider says and writes: every line and failure shows
them as ``[secret]`` (:func:`..messages.hiding`, whole or by the first characters an id is quoted by), and the
create journal records them as ``[secret]``. Which inputs they are is :data:`~.keys.SECRETS_KEY` in the inputs
(see there for who sets it). Both faces and every verb of the core go through here.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..messages import SECRET, hide, hiding
from .inputs import Failure
from .keys import SECRETS_KEY


def secret_keys(props: Mapping[str, Any]) -> frozenset[str]:
    """The names of the inputs of ``props`` that arrived secret."""
    names = props.get(SECRETS_KEY)
    return (
        frozenset(n for n in names if isinstance(n, str)) if isinstance(names, (list, tuple)) else frozenset()
    )


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


@contextlib.contextmanager
def hidden(props: Mapping[str, Any]) -> Iterator[None]:
    """Inside, the values of the secret inputs of ``props`` never reach a line or a sentence."""
    keys = secret_keys(props)
    with hiding([text for key in keys for text in _strings(props.get(key))]):
        yield


def shown(props: Mapping[str, Any]) -> dict[str, Any]:
    """``props`` with each secret input replaced by ``[secret]``: what a message may name an object by."""
    keys = secret_keys(props)
    return {k: (SECRET if k in keys and v is not None else v) for k, v in props.items()}


def redacted(body: dict[str, Any], props: Mapping[str, Any]) -> dict[str, Any]:
    """A create request's body (a wire dict, whose top-level keys are the inputs' names) as the create journal
    records it: each secret input as ``[secret]``."""
    keys = secret_keys(props)
    return {k: (SECRET if k in keys else v) for k, v in body.items()}


Check = Callable[[Mapping[str, Any], Mapping[str, Any]], tuple[dict[str, Any], list[Failure]]]


def hiding_check(check: Check) -> Check:
    """A kind's ``check``, its lines and its failures' reasons shown without the secret inputs' values."""

    @functools.wraps(check)
    def checked(olds: Mapping[str, Any], news: Mapping[str, Any]) -> tuple[dict[str, Any], list[Failure]]:
        with hidden(news):
            inputs, failures = check(olds, news)
            return inputs, [Failure(f.property, hide(f.reason)) for f in failures]

    return checked
