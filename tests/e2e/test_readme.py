"""The README's commands are the ones CI and the Makefile really run, read from the README itself, and the
reference pages in docs/ say what the code does.

A newcomer follows the README without reading the code, so what it tells them to type must exist and must be
what the tests and `.ci/run` use; the README stays short (the front door), and every relative link in it and in
docs/ leads somewhere.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from pulumi_together_rl.resources.inputs import OWNER_KEY

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
DOCS = {path.relative_to(ROOT).as_posix(): path.read_text() for path in sorted((ROOT / "docs").glob("*.md"))}
MAKEFILE = (ROOT / "Makefile").read_text()
CI_RUN = (ROOT / ".ci" / "run").read_text()

README_MAX_LINES = 250
# The reference page of each kind: its input and output tables.
PAGES = {"model_resource": "docs/model-resource.md", "training_session": "docs/training-session.md"}

FENCE = re.compile(r"^```[a-z]*\n(.*?)^```", re.M | re.S)


def _section(title_fragment: str) -> str:
    """The README text from the heading containing `title_fragment` to the next heading of the same level."""
    match = re.search(rf"^(#+) [^\n]*{re.escape(title_fragment)}[^\n]*\n", README, re.M | re.I)
    assert match, f"the README has no heading containing {title_fragment!r}"
    level = len(match.group(1))
    rest = README[match.end() :]
    end = re.search(rf"^#{{1,{level}}} ", rest, re.M)
    return rest[: end.start()] if end else rest


def _commands(text: str) -> list[str]:
    """Shell commands in the fenced blocks of `text`: comments and prompts removed, one per line."""
    commands = []
    for block in FENCE.findall(text):
        for line in block.splitlines():
            line = line.split(" #", 1)[0].strip()
            line = line.removeprefix("$ ")
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


def _make_targets() -> set[str]:
    return set(re.findall(r"^([A-Za-z][\w.-]*):", MAKEFILE, re.M))


def _recipe(target: str) -> str:
    match = re.search(rf"^{re.escape(target)}:[^\n]*\n((?:\t[^\n]*\n?)*)", MAKEFILE, re.M)
    assert match, f"the Makefile has no target {target!r}"
    return match.group(1)


def _ci_commands() -> list[str]:
    return [
        line.strip()
        for line in CI_RUN.splitlines()
        if line.strip() and not line.strip().startswith("#") and line.strip().startswith("make ")
    ]


def test_readme_gives_exactly_the_two_commands_demo_and_test():
    assert _commands(_section("Two commands")) == ["make demo", "make test"]


def test_readme_test_command_is_what_ci_runs():
    assert _ci_commands() == ["make test"]
    assert "make test" in _commands(_section("Two commands"))


def _make_commands(text: str) -> set[str]:
    return {
        shlex.split(command)[1]
        for command in _commands(text)
        if command.startswith("make ") and " " in command
    }


def test_every_make_command_in_the_readme_is_a_makefile_target():
    targets = _make_targets()
    used = _make_commands(README)
    assert {"demo", "test"} <= used
    assert used <= targets, f"the README names make targets the Makefile lacks: {sorted(used - targets)}"
    for page, text in DOCS.items():
        used = _make_commands(text)
        assert used <= targets, f"{page} names make targets the Makefile lacks: {sorted(used - targets)}"


def test_make_test_runs_the_whole_suite():
    """make test runs every tier, and the tiers' selections leave no test out: check takes what is neither cli nor
    release, test-cli what is cli and not release, test-release what is release."""
    assert "scripts/tiers.sh all" in _recipe("test")
    tiers = (ROOT / "scripts" / "tiers.sh").read_text()
    selections = re.findall(r'-m "([^"]+)"', tiers)
    assert selections == ["not cli and not release", "cli and not release", "release"]
    for cli in (False, True):
        for release in (False, True):
            chosen = [s for s in selections if eval(s, {}, {"cli": cli, "release": release})]
            assert len(chosen) == 1, (cli, release, chosen)  # every test in exactly one tier
    assert not re.search(r"pytest[^\n]*(\s-k\s|--deselect|--ignore)", tiers)


def test_make_demo_runs_the_demo_script():
    assert "scripts/demo.sh" in _recipe("demo")


def test_readme_emulator_options_exist_in_its_help():
    help_text = subprocess.run(
        [sys.executable, "-m", "pulumi_together_rl.emulator", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout

    def starting_the_emulator(text: str) -> list[str]:
        return [c for c in _commands(text) if "pulumi_together_rl.emulator" in c]

    # The emulator's page shows how to start it; every page that does (the README too) uses real options.
    assert starting_the_emulator(DOCS["docs/emulator.md"]), "docs/emulator.md shows no command starting it"
    emulator_commands = [c for text in (README, *DOCS.values()) for c in starting_the_emulator(text)]
    options = {
        word.split("=")[0] for c in emulator_commands for word in shlex.split(c) if word.startswith("--")
    }
    assert options, emulator_commands
    missing = sorted(option for option in options if option not in help_text)
    assert not missing, f"the README or docs/ use emulator options its --help does not list: {missing}"


@pytest.mark.parametrize(
    "key", ["together:apiKey", "together:baseUrl", "TOGETHER_API_KEY", "TOGETHER_BASE_URL"]
)
def test_readme_names_the_configuration_the_provider_reads(key):
    from pulumi_together_rl import config

    assert key in README
    assert key in {config.CONFIG_API_KEY, config.CONFIG_BASE_URL, config.ENV_API_KEY, config.ENV_BASE_URL}


# ------------------------------------------------------------------------ the README's size, and every link


def test_the_readme_is_at_most_250_lines():
    lines = len(README.splitlines())
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines, more than {README_MAX_LINES}: move detail to a page in docs/"
    )


FENCED = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)


def _prose(text: str) -> str:
    """`text` without its fenced blocks and inline code (neither holds links)."""
    return re.sub(r"`[^`\n]*`", "", FENCED.sub("", text))


def _anchors(text: str) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown file (duplicates get -1, -2, ...)."""
    anchors: set[str] = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", FENCED.sub("", text), re.M):
        heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        candidate, n = slug, 0
        while candidate in anchors:
            n += 1
            candidate = f"{slug}-{n}"
        anchors.add(candidate)
    return anchors


def _relative_links(page: str, text: str) -> list[tuple[str, Path, str]]:
    """(link, the file it points to, its anchor or "") for every relative link of `page`."""
    links = []
    for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", _prose(text)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:, ...
            continue
        path, _, anchor = target.partition("#")
        links.append((target, (ROOT / page).parent / path if path else ROOT / page, anchor))
    return links


@pytest.mark.parametrize("page", ["README.md", *DOCS])
def test_every_relative_link_points_to_a_file_that_exists(page):
    text = README if page == "README.md" else DOCS[page]
    links = _relative_links(page, text)
    assert links or page != "README.md", "the README links to no page"
    broken = [link for link, path, _ in links if not path.exists()]
    assert not broken, f"{page} links to files that do not exist: {broken}"
    # A link into a Markdown file's section names a heading it has.
    missing = [
        link
        for link, path, anchor in links
        if anchor and path.suffix == ".md" and anchor not in _anchors(path.read_text())
    ]
    assert not missing, f"{page} links to sections that do not exist: {missing}"


def test_the_readme_links_every_page_of_docs():
    linked = {path.resolve() for _, path, _ in _relative_links("README.md", README)}
    unlinked = sorted(page for page in DOCS if (ROOT / page).resolve() not in linked)
    assert not unlinked, f"the README links no way to {unlinked}"


# ------------------------------------------------------------------ the resources reference (docs/) vs the code


def _table(section: str, first_header: str) -> list[list[str]]:
    """Rows (cells) of the first Markdown table in `section` whose header starts with `first_header`."""
    rows: list[list[str]] = []
    inside = False
    for line in section.splitlines():
        if not line.startswith("|"):
            if inside:
                break
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not inside:
            inside = cells[0] == first_header
            continue
        if set(cells[0]) <= set("-: "):
            continue
        rows.append(cells)
    assert rows, f"no table with header {first_header!r}"
    return rows


def _names(cell: str) -> list[str]:
    return re.findall(r"`([a-z_]+)`", cell)


def _resource(kind: str):
    """The kind's public schema (its key tables) and its Args class."""
    import importlib

    module = importlib.import_module(f"pulumi_together_rl.resources.{kind}")
    schema = importlib.import_module(f"pulumi_together_rl.resources.{kind}_schema")
    args = getattr(module, "ModelResourceArgs" if kind == "model_resource" else "TrainingSessionArgs")
    return getattr(schema, kind.upper()), args


@pytest.mark.parametrize("kind", ["model_resource", "training_session"])
def test_the_reference_lists_exactly_the_inputs_and_which_replace(kind):
    import inspect

    schema, args = _resource(kind)
    rows = _table(DOCS[PAGES[kind]], "input")
    documented = {name: row for row in rows for name in _names(row[0])}
    declared = [p for p in inspect.signature(args.__init__).parameters if p != "self"]

    assert sorted(documented) == sorted(declared)
    replacing = {name for name, row in documented.items() if row[2].lower().startswith("yes")}
    # `model_resource` is the program's way to set `model_resources_id` (and replaces as it does).
    aliases = {"model_resource"} if kind == "training_session" else set()
    assert replacing == set(schema.replace_on_changes) | aliases
    required = {name for name, row in documented.items() if "required" in row[1]}
    assert required == {
        p
        for p, v in inspect.signature(args.__init__).parameters.items()
        if p != "self" and v.default is inspect.Parameter.empty
    }


@pytest.mark.parametrize("kind", ["model_resource", "training_session"])
def test_the_reference_lists_exactly_the_outputs(kind):
    schema, _ = _resource(kind)
    rows = _table(DOCS[PAGES[kind]], "output")
    documented = {name for row in rows for name in _names(row[0])}

    # What check adds to the inputs is an output too (the estimate, the model resource's declared facts), and
    # so is the declaration the resource class adds.
    assert documented == {"id", *schema.output_keys, *schema.check_added, OWNER_KEY}


@pytest.mark.parametrize(
    ("kind", "name", "constant"),
    [
        ("model_resource", "create_timeout", "MODEL_RESOURCE_CREATE_TIMEOUT"),
        ("model_resource", "delete_timeout", "MODEL_RESOURCE_DELETE_TIMEOUT"),
        ("training_session", "create_timeout", "TRAINING_SESSION_CREATE_TIMEOUT"),
        ("training_session", "delete_timeout", "TRAINING_SESSION_DELETE_TIMEOUT"),
    ],
)
def test_the_reference_gives_the_timeout_defaults_of_the_code(kind, name, constant):
    from pulumi_together_rl import config

    row = next(row for row in _table(DOCS[PAGES[kind]], "input") if _names(row[0]) == [name])
    assert f"default {getattr(config, constant):g}" in row[3]
