"""No page tells users to install something that the tests did not install (harness/install_docs.py).

The rule: every install command that README.md, docs/*.md or an example's README.md shows (``pip install``,
``uv add``, ``uv pip install``, ``npm install`` / ``npm i``, ``pulumi plugin install``, ``go get``, ``mvn`` ...,
in a fenced block or in inline code) that names what it installs is

* in a block marked ``<!-- install:NAME (tests/...py) -->``, whose named test file reads that very block
  (``install_commands("<page>", "NAME")``) and runs its commands as written; or
* word for word a command of such a block (a page repeating the README's tested command); or
* in a block marked ``<!-- published-release (...) -->``: what a published release will provide, counted as run
  by no test.

A bare ``npm ci`` or ``pip install --user`` names nothing and is not held to it. Cheap: it reads the pages and
the test files' source, and runs nothing.
"""

from __future__ import annotations

import re

import pytest
from harness.install_docs import ROOT, blocks, installs, mentions, pages, unattached_markers

from pulumi_together_rl import __version__


def _tested() -> dict[str, set[str]]:
    """{command: the pages whose tested blocks run it}."""
    found: dict[str, set[str]] = {}
    for page in pages():
        for block in blocks(page):
            if not block.published:
                for command in block.commands:
                    found.setdefault(" ".join(command.split()), set()).add(page)
    return found


def untested(page: str, text: str | None = None) -> list[str]:
    """``page:line: command`` for every install command of ``page`` that no test runs and no published-release
    block holds."""
    tested = _tested()
    return [
        f"{m.page}:{m.line}: {m.command}"
        for m in mentions(page, text)
        if m.block is None and m.command not in tested
    ]


@pytest.mark.parametrize("page", pages())
def test_every_install_command_of_the_page_is_one_a_test_runs(page):
    assert not unattached_markers(page), (
        f"{page}: these install markers are not right above a fenced block, or are not "
        f"`<!-- install:NAME (tests/...py) -->` / `<!-- published-release (...) -->`: lines {unattached_markers(page)}"
    )
    left = untested(page)
    assert not left, (
        "install commands that no test runs (put them in an `<!-- install:NAME (tests/...py) -->` block that the "
        "test runs, repeat a tested command word for word, or mark a registry form `<!-- published-release -->`): "
        + "; ".join(left)
    )


def test_every_tested_block_is_read_and_run_by_the_test_it_names():
    named = [block for page in pages() for block in blocks(page) if not block.published]
    assert {(b.page, b.name) for b in named} >= {
        ("README.md", "package"),
        ("README.md", "plugin"),
        ("README.md", "sdk"),
        ("docs/journal.md", "bucket"),
    }
    for block in named:
        test = ROOT / block.test
        assert test.is_file(), (
            f"{block.page}:{block.line}: install:{block.name} names {block.test}, which is not there"
        )
        reads = re.compile(
            rf"install_commands\(\s*\"{re.escape(block.page)}\",\s*\"{re.escape(block.name)}\"\s*\)"
        )
        assert reads.search(test.read_text()), (
            f"{block.page}:{block.line}: {block.test} never reads install:{block.name} "
            f'(install_commands("{block.page}", "{block.name}"))'
        )
        assert any(installs(command) for command in block.commands), (
            f"{block.page}:{block.line}: install:{block.name} installs nothing"
        )
    keys = [(b.page, b.name) for b in named]
    assert len(keys) == len(set(keys)), f"an install block name is used twice on one page: {keys}"


def test_the_tested_blocks_install_this_version():
    """The release files the blocks name are this version's (a release moves them with ``__version__``)."""
    for page in pages():
        for block in blocks(page):
            versions = set(
                re.findall(r"(?:[-_]v?|together-rl )(\d+\.\d+\.\d+)(?=[-. ])", " ".join(block.commands))
            )
            assert versions <= {__version__}, f"{page}:{block.line}: {sorted(versions)} is not {__version__}"


# ------------------------------------------------------------------------------------ the rule, on made pages

PAGE = """\
# A page

Install it with `pip install pulumi-together-rl` or `uv add ./somewhere`, and mention `npm ci` freely.

```bash
npm install left-pad && pulumi plugin install resource x 1.0.0
npm ci
```

<!-- published-release (nothing is published) -->
```bash
uv add pulumi-together-rl
```

<!-- install:package (tests/e2e/test_artifacts.py) -->
```bash
mkdir x && cd x
```
"""


def test_the_rule_flags_what_no_test_runs_and_spares_bare_and_published_commands():
    assert untested("made.md", PAGE) == [
        "made.md:6: npm install left-pad",
        "made.md:6: pulumi plugin install resource x 1.0.0",
        "made.md:3: pip install pulumi-together-rl",
        "made.md:3: uv add ./somewhere",
    ]
    [published, tested] = blocks("made.md", PAGE)
    assert published.published and published.commands == ("uv add pulumi-together-rl",)
    assert (tested.name, tested.test) == ("package", "tests/e2e/test_artifacts.py")
    assert unattached_markers("made.md", PAGE) == []
    assert unattached_markers("made.md", "<!-- install:x (tests/a.py) -->\nno block\n") == [1]


def test_a_repeated_tested_command_counts_as_tested():
    readme = next(b for b in blocks("README.md") if b.name == "plugin")
    assert untested("made.md", f"Run `{readme.commands[0]}` first.\n") == []
