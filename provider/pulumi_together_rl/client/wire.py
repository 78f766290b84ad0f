"""What the endpoints (:mod:`.api`) and create reconciliation (:mod:`.reconcile`) share: the API's paths, a
response body as a wire model, and cursor paging.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from .errors import ApiError, InvalidArgument, TogetherError

#: Most pages any listing follows (a server whose cursors never end cannot loop us forever).
MAX_PAGES = 1000

log = logging.getLogger("pulumi_together_rl.client")

_RESOURCES = "/v1/rl/model-resources"
_SESSIONS = "/v1/rl/training-sessions"
_SUPPORTED_MODELS = "/v1/rl/supported-models"

M = TypeVar("M", bound=BaseModel)


def _parse(model: type[M], data: Any, method: str, path: str) -> M:
    failure: ApiError
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0] if exc.error_count() else {}
        where = ".".join(str(p) for p in first.get("loc", ())) or "body"
        failure = ApiError(
            200,
            f"unexpected response body: {where}: {first.get('msg', 'invalid')} "
            f"({exc.error_count()} problem(s)). The API may have changed; upgrade pulumi-together-rl.",
            method=method,
            path=path,
        )
    raise failure  # outside the except block: no __context__


def _paginate(fetch: Callable[[str | None], Any], page_size: int) -> Iterator[Any]:
    """Validate ``page_size`` now (not at the first ``next``), then iterate lazily."""
    if isinstance(page_size, bool) or not isinstance(page_size, int) or not 1 <= page_size <= 100:
        raise InvalidArgument(f"page_size must be an integer between 1 and 100, got {page_size!r}")
    return _pages(fetch)


def _pages(fetch: Callable[[str | None], Any], *, strict: bool = False) -> Iterator[Any]:
    """Every item of every page, following ``after``, for at most :data:`MAX_PAGES` pages.

    A cursor seen before (the server's paging is going round in circles) or the page cap ends the iteration:
    with a warning in the log, or, when ``strict`` (reconciliation, which must see everything), with a
    :class:`TogetherError`.
    """
    seen: set[str] = set()
    after: str | None = None
    for _ in range(MAX_PAGES):
        page = fetch(after)
        yield from page.data
        if not page.data:
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


def _next_cursor(page: Any) -> str | None:
    """The ``after`` of the next page, or None on the last one."""
    meta = page.meta
    if meta.has_more is False:
        return None
    cursor = meta.next_cursor or (page.data[-1].id if meta.has_more else None)
    return cursor or None
