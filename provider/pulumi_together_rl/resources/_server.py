"""The one seam into the Pulumi SDK's dynamic-provider server: errors the user reads are one sentence.

The server (``python -m pulumi.dynamic``, module ``pulumi.dynamic.__main__``) answers an exception from
``create``/``read``/``update``/``delete``/``diff``/``check`` with ``context.abort(UNKNOWN,
traceback.format_exc())``, so the CLI prints 13 to 26 lines of Python traceback around the one useful line.
A :class:`~._errors.ProviderError` already is that line (``<doing> <kind> (<id>): <cause>. <what to do>``),
so the server's ``traceback`` global is swapped for a stand-in whose ``format_exc`` returns just the message
of a ProviderError; every other exception keeps its full traceback (it is a bug, and the traceback is what a
report needs), and so does everything where ``TOGETHER_RL_DEBUG=1``.

Version guard: the swap happens only where that module is the running ``__main__`` and still has the
``_abort_with_traceback`` wrapper and a ``traceback`` global that is the standard module; anywhere else
(another SDK version, tests in-process) nothing changes and tracebacks stay as they are. An SDK whose
dynamic-provider server let a provider shape its own error details would remove the need for this.
"""

from __future__ import annotations

import os
import sys
import threading
import traceback
from types import ModuleType
from typing import Any

from ._errors import ProviderError

_SERVER_MODULE = "pulumi.dynamic.__main__"
_lock = threading.Lock()


class _ShortTracebacks:
    """The ``traceback`` module, except ``format_exc`` of a ProviderError: its message alone."""

    def __getattr__(self, name: str) -> Any:
        return getattr(traceback, name)

    def format_exc(self, *args: Any, **kwargs: Any) -> str:
        exc = sys.exc_info()[1]
        if isinstance(exc, ProviderError) and os.environ.get("TOGETHER_RL_DEBUG") != "1":
            return str(exc)
        return traceback.format_exc(*args, **kwargs)


def server_module() -> ModuleType | None:
    """The running dynamic-provider server's module, if this process is one."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if main is not None and getattr(spec, "name", None) == _SERVER_MODULE:
        return main
    return None


def shorten_tracebacks() -> bool:
    """Install the stand-in once; whether the server now reports ProviderErrors as one sentence."""
    main = server_module()
    if main is None or not hasattr(main, "_abort_with_traceback"):
        return False
    with _lock:
        current = getattr(main, "traceback", None)
        if isinstance(current, _ShortTracebacks):
            return True
        if current is not traceback:
            return False
        main.traceback = _ShortTracebacks()  # type: ignore[attr-defined]
    return True
