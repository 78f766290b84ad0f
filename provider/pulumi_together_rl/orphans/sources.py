"""What the finder reads: the stack states (every stack of the backend by default), and the API each one
deploys to (key and base URL, and where each came from).

Precedence, for the key and the base URL each: ``--api-key`` / ``--base-url``, then the stack's own
``together:apiKey`` / ``together:baseUrl`` (readable for the stacks of the project in ``--cwd`` only: see
:mod:`.states`), then ``TOGETHER_API_KEY`` / ``TOGETHER_BASE_URL``, then (base URL) https://api.together.ai.
Flags win because whoever passes one says which API to check; stack config comes before the environment because
that is the provider's own order, so each stack is checked where it deploys. Stacks with the same key and base
URL share one API; every id any state holds counts as held in every API (a stricter "held" is safe).

The create journals read (:class:`JournalRead`), every one that a create of a stack read may have written to
(:mod:`..ownership.location`): this machine's folder, always; ``TOGETHER_RL_JOURNAL_URL`` when set; each stack's
own ``journalUrl`` setting; and, when the backend the CLI uses in ``--cwd`` (the one every stack is read from,
and the one state files are judged by) is a bucket, the journal beside its state. Reading one more journal can
only hold more objects back, never stop one that a journal names.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from .. import backend as stack_backend
from .. import ours
from ..client import errors
from ..client.api import ENV_API_KEY, ENV_BASE_URL, resolve_base_url
from ..config import CONFIG_API_KEY, CONFIG_BASE_URL
from ..ownership import location
from ._common import PULUMI_PARALLEL, OrphanError
from .states import StackState, export_stack, list_stacks, load_state_file, stack_config


@dataclasses.dataclass
class Api:
    """One Together API the finder lists: a base URL and a key, and the stacks that deploy with them."""

    base_url: str
    key: str | None = dataclasses.field(repr=False)
    key_sources: list[str] = dataclasses.field(default_factory=list)
    url_sources: list[str] = dataclasses.field(default_factory=list)
    stacks: list[str] = dataclasses.field(default_factory=list)

    @property
    def key_source(self) -> str:
        """Where the key came from, never the key: ``stack dev's together:apiKey``."""
        return " and ".join(self.key_sources) + (" (the same key)" if len(self.key_sources) > 1 else "")

    def describe(self) -> str:
        url = " and ".join(self.url_sources)
        for_stacks = (
            f" for {_count(len(self.stacks), 'stack')}: {', '.join(self.stacks)}" if self.stacks else ""
        )
        return (
            f"checked {self.base_url} (base URL from {url}) with the key from {self.key_source}{for_stacks}"
        )


@dataclasses.dataclass
class JournalRead:
    """A create journal the finder reads: ``url`` None for this machine's folder."""

    url: str | None
    sources: list[str] = dataclasses.field(default_factory=list)
    """Why it is read: ``TOGETHER_RL_JOURNAL_URL``, ``stack dev's together:journalUrl``, ``beside ...``."""

    def describe(self) -> str:
        where = location.printable(self.url) if self.url else "this machine's folder"
        return f"read the create journal in {where} ({' and '.join(self.sources)})"


@dataclasses.dataclass
class Gathered:
    states: list[StackState]
    apis: list[Api]
    every_stack: bool
    """Every stack of the logged-in backend was read (not only the given ones)."""
    journals: list[JournalRead] = dataclasses.field(default_factory=list)
    """Every create journal to read: this machine's folder first."""


def gather(args: argparse.Namespace, note: Callable[[str], None], secret: Callable[[str], None]) -> Gathered:
    """Read the states ``args`` asks for and resolve their APIs. ``secret`` receives every key read, before
    anything else is written (the output is scrubbed of each)."""
    flag_key = (args.api_key or "").strip() or None
    flag_url = (args.base_url or "").strip() or None
    env_key = os.environ.get(ENV_API_KEY, "").strip() or None
    env_url = os.environ.get(ENV_BASE_URL, "").strip() or None
    for key in (flag_key, env_key):
        if key:
            secret(key)
    every_stack = bool(args.all_stacks) or not (args.state or args.stack or args.none)
    need_config = not (flag_key and flag_url)
    cwd = args.cwd
    here = os.path.abspath(cwd or os.curdir)

    files = [load_state_file(path) for path in args.state or ()]
    wanted: list[tuple[str, str | None]] = []  # (name to export, its fully qualified name in the cwd project)
    if every_stack or args.stack:
        # The project's stacks: only their config can be read, and `pulumi refresh` runs in their folder.
        mine = _project_stacks(cwd, note if need_config else lambda line: None)
        if every_stack:
            wanted += [(name, name if name in mine else None) for name in list_stacks(cwd=cwd, note=note)]
        for name in args.stack or ():
            own = _match(name, mine)
            if not {name, own} & {w[0] for w in wanted}:  # `dev` is `organization/proj/dev` when listed
                wanted.append((name, own))

    def read(item: tuple[str, str | None]) -> tuple[StackState, dict[str, str] | OrphanError | None]:
        name, own = item
        state = export_stack(name, cwd=cwd, folder=here if own else None)
        if own:
            state = dataclasses.replace(state, name=own)
        if not own:  # only the project's stacks' config can be read (its journalUrl too)
            return state, None
        try:
            return state, stack_config(own, cwd=cwd)
        except OrphanError as exc:
            return state, exc

    with ThreadPoolExecutor(max_workers=PULUMI_PARALLEL) as pool:
        read_stacks = list(pool.map(read, wanted))

    apis: dict[tuple[str, str | None], Api] = {}

    def add(label: str | None, config: dict[str, str]) -> None:
        key, key_from = _pick(
            (flag_key, "--api-key"),
            *((config.get(name), f"stack {label}'s {name}") for name in ours.config_keys("apiKey")),
            (env_key, ENV_API_KEY),
        )
        raw_url, url_from = _pick(
            (flag_url, "--base-url"),
            *((config.get(name), f"stack {label}'s {name}") for name in ours.config_keys("baseUrl")),
            (env_url, ENV_BASE_URL),
            ("https://api.together.ai", "the default"),
        )
        if key:
            secret(key)
        url = _base_url(raw_url or "", url_from or "")
        api = apis.setdefault((url, key), Api(base_url=url, key=key))
        for sources, source in ((api.key_sources, key_from), (api.url_sources, url_from)):
            if source and source not in sources:
                sources.append(source)
        if label:
            api.stacks.append(label)

    for state in files:  # a file's stack config is not known here
        add(state.label, {})
    for state, config in read_stacks:
        if isinstance(config, OrphanError):
            note(
                f"note: the config of stack {state.label} could not be read ({config.cause}), so it is checked "
                "with --api-key / --base-url or TOGETHER_API_KEY / TOGETHER_BASE_URL."
            )
            config = None
        add(state.label, config or {})
    states = files + [state for state, _ in read_stacks]
    if not states:
        add(None, {})
    return Gathered(
        states=states,
        apis=list(apis.values()),
        every_stack=every_stack,
        journals=_journals(cwd, read_stacks),
    )


def _journals(
    cwd: str | None, read_stacks: list[tuple[StackState, dict[str, str] | OrphanError | None]]
) -> list[JournalRead]:
    """Every create journal a create of the stacks read may have written to (see the module docstring)."""
    found: dict[str | None, JournalRead] = {None: JournalRead(None, ["creates of this machine"])}

    def read(url: str, why: str) -> None:
        sources = found.setdefault(url, JournalRead(url)).sources
        if why not in sources:
            sources.append(why)

    explicit = os.environ.get(location.ENV_URL, "").strip()
    if explicit:
        read(explicit, location.ENV_URL)
    for state, config in read_stacks:
        if isinstance(config, dict):
            for key in ours.config_keys(location.SETTING):
                if config.get(key):
                    read(config[key], f"stack {state.label}'s {key}")
    here = stack_backend.locate(cwd)
    if here.scheme in stack_backend.BUCKET_SCHEMES:
        read(location.sibling(here.url), f"beside the stacks' state in {location.printable(here.url)}")
    return list(found.values())


@dataclasses.dataclass
class StackJournals:
    """The create journals of one stack (``recover``): every one :func:`gather` would read for it, and the one its
    ``pulumi up`` writes to, resolved as a create resolves it (:func:`..ownership.location.locate`)."""

    read: list[JournalRead]
    used: location.Location
    note: str | None = None
    """Why the stack's own config could not be read (its ``journalUrl`` then unknown), if so."""


def stack_journals(state: StackState, cwd: str | None) -> StackJournals:
    """The journals of the stack ``state`` was exported from, whose project is in ``cwd``."""
    config: dict[str, str] | OrphanError | None = None
    own = _match(state.name or "", _project_stacks(cwd, lambda line: None)) if state.name else None
    if own:
        try:
            config = stack_config(own, cwd=cwd)
        except OrphanError as exc:
            config = exc
    read = _journals(cwd, [(state, config)])
    setting, source = None, None
    if isinstance(config, dict):
        for key in ours.config_keys(location.SETTING):
            if config.get(key):
                setting, source = config[key], f"stack {state.label}'s {key}"
                break
    used = location.locate(stack_backend.locate(cwd), setting=setting, setting_source=source or "")
    note = (
        f"the config of stack {state.label} could not be read ({config.cause})"
        if isinstance(config, OrphanError)
        else None
    )
    if used.url is not None and used.url not in {r.url for r in read}:
        read.append(JournalRead(used.url, [used.source]))
    return StackJournals(read, used, note)


def _project_stacks(cwd: str | None, note: Callable[[str], None]) -> list[str]:
    """The fully qualified names of the stacks of the project in ``cwd``: those whose config can be read."""
    try:
        return list_stacks(cwd=cwd, all_projects=False)
    except OrphanError as exc:
        where = os.path.abspath(cwd or os.curdir)
        note(
            f"note: no stack's {CONFIG_API_KEY} or {CONFIG_BASE_URL} was read: {where} is no Pulumi project the "
            f"CLI can list ({exc.cause}); pass --cwd with a project folder to read its stacks' config."
        )
        return []


def _match(name: str, mine: list[str]) -> str | None:
    """The fully qualified name of ``name`` (``dev``, ``org/dev`` or ``org/proj/dev``) among the project's."""
    if name in mine:
        return name
    parts = name.split("/")
    if len(parts) == 1:
        found = [m for m in mine if m.rsplit("/", 1)[-1] == name]
    elif len(parts) == 2:
        found = [m for m in mine if m.split("/")[0] == parts[0] and m.rsplit("/", 1)[-1] == parts[1]]
    else:
        found = []
    return found[0] if len(found) == 1 else None  # ambiguous: its config is not read


def _pick(*candidates: tuple[str | None, str]) -> tuple[str | None, str | None]:
    for value, source in candidates:
        if value:
            return value, source
    return None, None


def _base_url(raw: str, source: str) -> str:
    try:
        return resolve_base_url(raw)
    except errors.ConfigurationError:
        raise OrphanError(
            "connecting to the Together API",
            "",
            None,
            f"the base URL {raw!r} (from {source}) is not a valid http(s) URL",
            f"Fix {source}",
        ) from None


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
