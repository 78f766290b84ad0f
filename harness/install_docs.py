"""The install commands the documentation shows (README.md, docs/*.md, examples/**/README.md), and which of them a
test runs.

Two markers, each right before a fenced block:

* ``<!-- install:NAME (tests/e2e/test_x.py) -->``: the block is run, line by line as written, by that test file,
  which reads it with :func:`install_commands` (``install_commands("README.md", "package")``);
* ``<!-- published-release (...) -->``: what a published release will provide (``uv add pulumi-together-rl``
  from PyPI, ``npm install @pulumi-together-rl/sdk``, ``pulumi plugin install ... --server github://...``). It is
  shown, and counted as run by no test.

``tests/unit/test_doc_installs.py`` holds every other install command of those pages, in a fenced block or in
inline code, to be one a tested block runs word for word.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

MARKER = re.compile(
    r"^<!-- (?:install:(?P<name>[\w-]+) \((?P<test>tests/[\w/.-]+\.py)\)|(?P<published>published-release)\b[^\n]*?) -->\n"
    r"```(?:bash|sh)?\n(?P<body>.*?)^```",
    re.M | re.S,
)
ANY_MARKER = re.compile(r"^<!-- (?:install:|published-release)", re.M)
FENCE = re.compile(r"^(```|~~~)[^\n]*\n(.*?)^\1[^\n]*$", re.M | re.S)
INLINE = re.compile(r"`([^`]+)`")

# A command that installs something, at the start of a shell command (after `sudo` or VAR=value assignments).
INSTALL = re.compile(
    r"^(?:sudo\s+)?(?:\w+=\S*\s+)*"
    r"(?P<verb>(?:python3?\s+-m\s+)?pip3?\s+install|uv\s+(?:add|pip\s+install|tool\s+install)|pipx\s+install"
    r"|poetry\s+add|npm\s+(?:install|i|ci|add)|yarn\s+add|pnpm\s+(?:add|install)|pulumi\s+plugin\s+install"
    r"|pulumi\s+package\s+add|go\s+(?:get|install)|mvn|gradle|dotnet\s+add|nuget\s+install)(?=\s|$)(?P<rest>.*)$"
)


@dataclasses.dataclass(frozen=True)
class Block:
    """A marked fenced block: an ``install:NAME`` block run by ``test``, or a published-release one (no name)."""

    page: str
    line: int
    name: str | None
    test: str | None
    commands: tuple[str, ...]

    @property
    def published(self) -> bool:
        return self.name is None


@dataclasses.dataclass(frozen=True)
class Mention:
    """An install command a page shows: ``block`` is the marked block it is in (None: unmarked, or inline)."""

    page: str
    line: int
    command: str
    block: Block | None


def pages() -> list[str]:
    """Every page whose install commands are held to the tests, relative to the repository."""
    found = [
        ROOT / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted(ROOT.glob("examples/**/README.md")),
    ]
    return [path.relative_to(ROOT).as_posix() for path in found if "node_modules" not in path.parts]


def commands(body: str) -> list[str]:
    """The commands of a fenced block's text: one a line, comments and a ``$ `` prompt removed."""
    found = []
    for line in body.splitlines():
        line = re.split(r"\s#", line, maxsplit=1)[0].strip().removeprefix("$ ")
        if line and not line.startswith("#"):
            found.append(line)
    return found


def blocks(page: str, text: str | None = None) -> list[Block]:
    """The marked blocks of ``page`` (its text: ``text``, else the file's)."""
    text = (ROOT / page).read_text() if text is None else text
    return [
        Block(
            page=page,
            line=text.count("\n", 0, match.start()) + 1,
            name=match["name"],
            test=match["test"],
            commands=tuple(commands(match["body"])),
        )
        for match in MARKER.finditer(text)
    ]


def unattached_markers(page: str, text: str | None = None) -> list[int]:
    """The lines of markers that no fenced block follows (or that are not well formed)."""
    text = (ROOT / page).read_text() if text is None else text
    attached = {text.count("\n", 0, match.start()) + 1 for match in MARKER.finditer(text)}
    every = {text.count("\n", 0, match.start()) + 1 for match in ANY_MARKER.finditer(text)}
    return sorted(every - attached)


def install_commands(page: str, name: str) -> list[str]:
    """The commands of ``page``'s ``install:NAME`` block, as a test runs them."""
    found = [block for block in blocks(page) if block.name == name]
    assert len(found) == 1, f"{page} has {len(found)} install:{name} blocks, not one"
    return list(found[0].commands)


def installs(command: str) -> list[str]:
    """The install commands in a shell command line (split at ``&&``, ``||``, ``;`` and ``|``) that name what
    they install: a package, a path, a file. A bare ``npm ci`` or ``pip install --user`` names nothing (it
    installs a project's own manifest, or mentions the tool) and is left out."""
    found = []
    for part in re.split(r"&&|\|\||;|\|", command):
        part = " ".join(part.split())
        match = INSTALL.match(part)
        if not match:
            continue
        try:
            words = shlex.split(match["rest"])
        except ValueError:
            words = match["rest"].split()
        if any(not word.startswith("-") for word in words):
            found.append(part)
    return found


def mentions(page: str, text: str | None = None) -> list[Mention]:
    """Every install command ``page`` shows, in a fenced block (marked or not) or in inline code."""
    text = (ROOT / page).read_text() if text is None else text
    marked = {block.line: block for block in blocks(page, text)}
    found: list[Mention] = []
    for fence in FENCE.finditer(text):
        first = text.count("\n", 0, fence.start()) + 1
        block = marked.get(first - 1)  # a marker is the line right above its block
        for offset, line in enumerate(fence.group(2).splitlines(), start=1):
            for command in commands(line):
                found += [Mention(page, first + offset, c, block) for c in installs(command)]
    prose = FENCE.sub(lambda fence: "\n" * fence.group(0).count("\n"), text)
    for span in INLINE.finditer(prose):
        line = prose.count("\n", 0, span.start()) + 1
        found += [Mention(page, line, c, None) for c in installs(span.group(1))]
    return found
