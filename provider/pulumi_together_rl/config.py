"""Provider settings (API key, base URL, poll interval) and the named defaults of the provider options.

Where settings come from, first match wins:

==================  ===========================  =============================
setting             Pulumi stack config          environment variable
==================  ===========================  =============================
API key             ``together:apiKey`` (secret)  ``TOGETHER_API_KEY``
base URL            ``together:baseUrl``          ``TOGETHER_BASE_URL``
poll interval (s)   ``together:pollInterval``     ``TOGETHER_RL_POLL_INTERVAL``
journal URL         ``together:journalUrl``       ``TOGETHER_RL_JOURNAL_URL`` (first)
account cap ($/h)   ``together:maxAccountPricePerHour``  (none)
==================  ===========================  =============================

The account cap (:mod:`.resources.spend`) has no environment variable: it is a decision of the stack's, reviewed
with its config.

The journal URL is the one setting whose environment variable wins over the stack config: where the create
journal lives is a property of the machines and the team (:mod:`.ownership.location`), and a CI job sets it once
for every stack it runs.

The stack config reaches a dynamic provider only through ``configure()`` (the provider process has no Pulumi
engine to ask, and ``PULUMI_CONFIG`` is empty there), so :func:`configure` records it in a process-level
registry guarded by a lock. Nothing here is ever stored on a provider object: the provider is pickled into the
Pulumi state (``__provider``), and the key must never be there in plain text.

What ``configure()`` receives is not always the stack config of now. The engine records the whole stack config
as the inputs of the stack's default ``pulumi-python`` provider (``pulumi:providers:pulumi-python::default`` in
the state, secrets encrypted by the stack's secrets provider). The steps of the program (check, diff, create,
update) use the provider as the program declares it, with the current stack config, and a deployment that runs
the program (``pulumi up``, ``pulumi refresh --run-program``) records that config. ``pulumi refresh`` and
``pulumi destroy``, and the refresh that ``options.refresh: always`` runs before preview and up, use the provider
from the state, configured from the recorded copy (measured with CLI v3.274.1). So after
``pulumi config set --secret together:apiKey NEW`` (or a new ``together:baseUrl``) they still use the old value
until :data:`RECORD_CONFIG` records the new one. The provider cannot tell a stale copy from a current one (it
never sees the other), and it must not look for a key anywhere else, so the errors a stale copy causes name that
command (``messages.py``). Environment variables are read when a setting is needed, not at import or
configure time: a key or URL taken from the environment is the current one.

Note that ``pulumi.dynamic.Config.get`` prefixes a key without ``:`` with the *project* name, so the fully
qualified keys above are what we look up.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
import sys
import threading
from collections.abc import Iterator, Mapping
from typing import Any

DEFAULT_BASE_URL = "https://api.together.ai"
"""The API when neither ``together:baseUrl`` nor ``TOGETHER_BASE_URL`` is set (the official SDK's default)."""

DEFAULT_POLL_INTERVAL = 10.0
"""Seconds between polls once the interval has grown (config ``together:pollInterval`` overrides it)."""

CONFIG_API_KEY = "together:apiKey"
CONFIG_BASE_URL = "together:baseUrl"
CONFIG_POLL_INTERVAL = "together:pollInterval"
CONFIG_JOURNAL_URL = "together:journalUrl"
CONFIG_MAX_ACCOUNT_PRICE = "together:maxAccountPricePerHour"
SETTINGS = (
    CONFIG_API_KEY,
    CONFIG_BASE_URL,
    CONFIG_POLL_INTERVAL,
    CONFIG_JOURNAL_URL,
    CONFIG_MAX_ACCOUNT_PRICE,
)
"""Every stack config key the provider reads."""
ENV_API_KEY = "TOGETHER_API_KEY"
ENV_BASE_URL = "TOGETHER_BASE_URL"
ENV_POLL_INTERVAL = "TOGETHER_RL_POLL_INTERVAL"

# Provider options (inputs of the resources). Pulumi's customTimeouts never reach a dynamic provider, so the
# timeouts are inputs with these defaults, in seconds. A model resource can wait in a capacity queue for a long
# time, hence the long create default.
MODEL_RESOURCE_CREATE_TIMEOUT = 3600.0
MODEL_RESOURCE_DELETE_TIMEOUT = 900.0
TRAINING_SESSION_CREATE_TIMEOUT = 1800.0
TRAINING_SESSION_DELETE_TIMEOUT = 600.0
FORCE_STOP = False

RECORD_CONFIG = "pulumi refresh --run-program"
"""The command that makes the stack's provider record the current stack config (see the module docstring). Of
the commands that run the program it is the one that changes nothing in the API (a refresh only reads), so it
is safe whatever the program would change; `pulumi up --run-program` records it too, but also applies the plan."""

MISSING_KEY_HINT = (
    "Set it with `pulumi config set --secret together:apiKey <key>` or the TOGETHER_API_KEY environment variable "
    f"(a refresh or destroy sees a together:apiKey set since the last deployment only after `{RECORD_CONFIG}`)"
)


@dataclasses.dataclass(frozen=True)
class Settings:
    """The effective settings; ``api_key`` is never shown in ``repr``."""

    api_key: str | None = dataclasses.field(default=None, repr=False)
    base_url: str | None = None
    poll_interval: float = DEFAULT_POLL_INTERVAL
    api_key_from: str | None = None
    """Where the key came from (``together:apiKey`` or ``TOGETHER_API_KEY``), for errors that blame it."""
    base_url_from: str | None = None
    """Where the base URL came from (``together:baseUrl``, ``TOGETHER_BASE_URL``), None for the default."""
    journal_url: str | None = None
    """The stack config's create journal URL (``together:journalUrl``), None when unset
    (:mod:`.ownership.location` decides where the journal is)."""
    max_account_price_per_hour: Any = None
    """The stack config's cap on the account's estimated $/h after a change (``together:maxAccountPricePerHour``)
    as given, None when unset: :func:`.resources.spend.cap_setting` judges it."""


_lock = threading.Lock()
_configured: dict[str, Any] = {}
_warned_poll_interval = False  # a bad poll interval is reported once per process, not at every wait


def configure(config: Any) -> None:
    """Record the stack config handed to ``ResourceProvider.configure``.

    ``config`` is a ``pulumi.dynamic.Config`` (or any object with ``get(key)``, such as a dict). Only the
    ``together:*`` keys of :data:`SETTINGS` are kept; empty values count as unset.
    """
    values: dict[str, Any] = {}
    for key in SETTINGS:
        value = config.get(key) if config is not None else None
        if value is not None and value != "":
            values[key] = value
    with _lock:
        _configured.clear()
        _configured.update(values)


_program: contextvars.ContextVar[Mapping[str, Any] | None] = contextvars.ContextVar(
    "program_config", default=None
)


@contextlib.contextmanager
def program_config() -> Iterator[None]:
    """Inside: the settings come from the stack config as the *program* sees it (a function such as
    ``latest_checkpoint`` runs in the program's process, which has no ``configure()``), for this context only,
    so that a provider in the same process keeps its own."""
    from pulumi.runtime.config import get_config

    token = _program.set({k: get_config(k) for k in SETTINGS})
    try:
        yield
    finally:
        _program.reset(token)


def reset() -> None:
    """Forget the recorded stack config and the warnings already given (tests)."""
    global _warned_poll_interval
    with _lock:
        _configured.clear()
        _warned_poll_interval = False


def current(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings now: recorded stack config first, then the environment, then defaults."""
    env = os.environ if environ is None else environ
    program = _program.get()
    if program is not None:
        configured = {k: v for k, v in program.items() if v is not None and v != ""}
    else:
        with _lock:
            configured = dict(_configured)

    def pick(config_key: str, env_key: str) -> tuple[Any, str | None]:
        value = configured.get(config_key)
        if value is not None and value != "":
            return value, config_key
        value = env.get(env_key) or None
        return value, (env_key if value is not None else None)

    api_key, api_key_from = pick(CONFIG_API_KEY, ENV_API_KEY)
    base_url, base_url_from = pick(CONFIG_BASE_URL, ENV_BASE_URL)
    return Settings(
        api_key=str(api_key) if api_key is not None else None,
        base_url=str(base_url) if base_url is not None else None,
        poll_interval=_poll_interval(pick(CONFIG_POLL_INTERVAL, ENV_POLL_INTERVAL)[0]),
        api_key_from=api_key_from,
        base_url_from=base_url_from,
        journal_url=str(configured[CONFIG_JOURNAL_URL]) if configured.get(CONFIG_JOURNAL_URL) else None,
        max_account_price_per_hour=configured.get(CONFIG_MAX_ACCOUNT_PRICE),
    )


def _poll_interval(raw: Any) -> float:
    global _warned_poll_interval
    if raw is None:
        return DEFAULT_POLL_INTERVAL
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = -1.0
    if not value > 0:  # also NaN
        with _lock:
            warned, _warned_poll_interval = _warned_poll_interval, True
        if warned:
            return DEFAULT_POLL_INTERVAL
        print(
            f"warning: ignoring poll interval {raw!r} (from {CONFIG_POLL_INTERVAL} or {ENV_POLL_INTERVAL}): "
            f"it must be a number of seconds > 0; using {DEFAULT_POLL_INTERVAL:g} s",
            file=sys.stderr,
        )
        return DEFAULT_POLL_INTERVAL
    return value
