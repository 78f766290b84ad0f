"""What the endpoints (:mod:`.api`) and create reconciliation (:mod:`.reconcile`) share: the API's paths, a
response body as a wire model, a list answer read item by item, and cursor paging.

A list answer is read item by item (:func:`_parse_list`): one object this version cannot read (a field of a
type it does not expect, a required field missing) is skipped with a warning, never the whole page. A list
serves every wait of its kind at once (:mod:`..waiting`), and one unreadable object of someone else's must not
fail them all, and with them tear down every healthy create. The GET of one object still raises on a body it
cannot read: that is about that object alone.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from ..messages import progress_line
from .errors import ApiError, InvalidArgument, TogetherError
from .models import ListMeta, _ListPage

#: Most pages any listing follows (a server whose cursors never end cannot loop us forever).
MAX_PAGES = 1000

log = logging.getLogger("pulumi_together_rl.client")

_RESOURCES = "/v1/rl/model-resources"
_SESSIONS = "/v1/rl/training-sessions"
_SUPPORTED_MODELS = "/v1/rl/supported-models"
_CHECKPOINTS = "/v1/rl/checkpoints"

M = TypeVar("M", bound=BaseModel)
L = TypeVar("L", bound=_ListPage)


class _Identified(Protocol):
    @property
    def id(self) -> str: ...


T = TypeVar("T", bound=_Identified, covariant=True)


class _Page(Protocol[T]):
    """One page of a list answer: its items and its paging metadata."""

    @property
    def data(self) -> Sequence[T]: ...

    @property
    def meta(self) -> ListMeta: ...


#: What a warning calls an item of a list, by the list's path.
_ITEM_KINDS = {_RESOURCES: "model resource", _SESSIONS: "training session"}

#: Longest id (characters) a warning prints: an id is the API's to choose, a line is ours to keep short.
_MAX_ID = 80
#: Longest validation message a warning prints (an enum's lists every value it knows).
_MAX_PROBLEM = 160


def _first_error(exc: ValidationError) -> ErrorDetails | dict[str, Any]:
    return exc.errors()[0] if exc.error_count() else {}


def _parse(model: type[M], data: Any, method: str, path: str) -> M:
    failure: ApiError
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = _first_error(exc)
        where = ".".join(str(p) for p in first.get("loc", ())) or "body"
        failure = ApiError(
            200,
            f"unexpected response body: {where}: {first.get('msg', 'invalid')} "
            f"({exc.error_count()} problem(s)). The API may have changed; upgrade pulumi-together-rl.",
            method=method,
            path=path,
        )
    raise failure  # outside the except block: no __context__


def _parse_list(model: type[L], item: type[BaseModel], data: Any, method: str, path: str) -> L:
    """A list answer as ``model`` (a ``*List`` with ``data`` and ``meta``) whose ``data`` holds the items that
    parse as ``item``; one that does not is skipped, with one warning line on stderr per item per process.

    The envelope is validated as a whole: a body that is not an object, a ``data`` that is not a list, or a
    bad ``meta`` raises the :class:`ApiError` of :func:`_parse`, as any other unreadable body. The ids of
    every raw item, skipped ones included, go with the page (``_raw_ids``) so that paging follows the answer,
    not what this client could read of it (see :func:`_pages`).
    """
    raw = data.get("data") if isinstance(data, dict) else None
    if not isinstance(raw, list):
        return _parse(model, data, method, path)  # no items to read one by one: the envelope decides
    page = _parse(model, {**data, "data": []}, method, path)
    parsed = []
    for entry in raw:
        try:
            parsed.append(item.model_validate(entry))
        except ValidationError as exc:
            _warn_skipped(entry, exc, path)
    page.data = parsed
    page._raw_ids = [_raw_id(entry) for entry in raw]
    return page


def _raw_id(entry: Any) -> str | None:
    ident = entry.get("id") if isinstance(entry, dict) else None
    return ident if isinstance(ident, str) and ident else None


_warned_lock = threading.Lock()
_warned: set[tuple[str, str]] = set()


def _warn_skipped(entry: Any, exc: ValidationError, path: str) -> None:
    """One line naming the skipped item and its first problem (never the item itself: it may be large, or hold
    what a log should not); once per item id per process, as every tick of a watcher lists it again."""
    first = _first_error(exc)
    where = ".".join(str(p) for p in first.get("loc", ())) or "item"
    problem = _clip(str(first.get("msg", "invalid")), _MAX_PROBLEM)
    more = exc.error_count() - 1
    if more > 0:
        problem += f" (and {more} more problem{'s' if more > 1 else ''})"
    ident = _raw_id(entry)
    # An item without an id is told apart by its first problem: the same broken shape warns once.
    key = (path, f"id:{ident}" if ident is not None else f"no id:{where}: {problem}")
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    kind = _ITEM_KINDS.get(path, "item")
    named = f"{kind} {_clip(_printable(ident), _MAX_ID)}" if ident is not None else f"a {kind} with no id"
    progress_line(
        f"warning: skipped {named} in a list of {path}: {where}: {problem} "
        "(the API may have changed; upgrade pulumi-together-rl)"
    )


def _printable(text: str) -> str:
    # An id is printed on one line of the user's terminal: no newline or escape sequence of the API's.
    return "".join(c if c.isprintable() else "?" for c in text)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _paginate(fetch: Callable[[str | None], _Page[T]], page_size: int) -> Iterator[T]:
    """Validate ``page_size`` now (not at the first ``next``), then iterate lazily."""
    if isinstance(page_size, bool) or not isinstance(page_size, int) or not 1 <= page_size <= 100:
        raise InvalidArgument(f"page_size must be an integer between 1 and 100, got {page_size!r}")
    return _pages(fetch)


def _pages(fetch: Callable[[str | None], _Page[T]], *, strict: bool = False) -> Iterator[T]:
    """Every item of every page, following ``after``, for at most :data:`MAX_PAGES` pages.

    A page's end is decided by what the API sent, skipped items included (:func:`_parse_list`): a page whose
    every item was skipped does not end the listing, and the cursor after it is its last raw item's id.
    A cursor seen before (the server's paging is going round in circles) or the page cap ends the iteration:
    with a warning in the log, or, when ``strict`` (reconciliation, which must see everything), with a
    :class:`TogetherError`.
    """
    seen: set[str] = set()
    after: str | None = None
    for _ in range(MAX_PAGES):
        page = fetch(after)
        yield from page.data
        if not (page.data or getattr(page, "_raw_ids", None)):
            return
        after = _next_cursor(page)
        if after is None:
            return
        if after in seen:
            problem = f"the API returned the cursor {after!r} twice; its paging goes round in circles"
            break
        seen.add(after)
    else:
        problem = f"the listing did not end after {MAX_PAGES} pages"
    if strict:
        raise TogetherError(f"listing stopped: {problem}")
    log.warning("listing stopped early: %s", problem)


def _next_cursor(page: _Page[_Identified]) -> str | None:
    """The ``after`` of the next page, or None on the last one."""
    meta = page.meta
    if meta.has_more is False:
        return None
    raw_ids = getattr(page, "_raw_ids", None)
    # The last raw item, even a skipped one: after the last *parsed* one the server would send it again.
    last = raw_ids[-1] if raw_ids and raw_ids[-1] else (page.data[-1].id if page.data else None)
    cursor = meta.next_cursor or (last if meta.has_more else None)
    return cursor or None
