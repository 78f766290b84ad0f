"""The README's commands are the ones CI and the Makefile really run, read from the README itself.

A newcomer follows the README without reading the code, so what it tells them to type must exist and must be
what the tests and `.ci/run` use.
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
MAKEFILE = (ROOT / "Makefile").read_text()
CI_RUN = (ROOT / ".ci" / "run").read_text()

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


def test_every_make_command_in_the_readme_is_a_makefile_target():
    targets = _make_targets()
    used = {
        shlex.split(command)[1]
        for command in _commands(README)
        if command.startswith("make ") and " " in command
    }
    assert {"demo", "test"} <= used
    assert used <= targets, f"the README names make targets the Makefile lacks: {sorted(used - targets)}"


def test_make_test_runs_the_whole_suite():
    recipe = _recipe("test")
    assert "pytest" in recipe
    # The whole suite: no selection that would leave tests out.
    assert not re.search(r"pytest[^\n]*(\s-k\s|\s-m\s|--deselect|--ignore)", recipe)


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
    emulator_commands = [c for c in _commands(README) if "pulumi_together_rl.emulator" in c]
    assert emulator_commands, "the README shows no command starting the emulator"
    options = {
        word.split("=")[0] for c in emulator_commands for word in shlex.split(c) if word.startswith("--")
    }
    assert options, emulator_commands
    missing = sorted(option for option in options if option not in help_text)
    assert not missing, f"the README uses emulator options its --help does not list: {missing}"


@pytest.mark.parametrize(
    "key", ["together:apiKey", "together:baseUrl", "TOGETHER_API_KEY", "TOGETHER_BASE_URL"]
)
def test_readme_names_the_configuration_the_provider_reads(key):
    from pulumi_together_rl import config

    assert key in README
    assert key in {config.CONFIG_API_KEY, config.CONFIG_BASE_URL, config.ENV_API_KEY, config.ENV_BASE_URL}


# ----------------------------------------------------------------------- the resources reference vs the code


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


@pytest.mark.parametrize(
    ("heading", "kind"), [("`ModelResource`", "model_resource"), ("`TrainingSession`", "training_session")]
)
def test_readme_reference_lists_exactly_the_inputs_and_which_replace(heading, kind):
    import inspect

    schema, args = _resource(kind)
    rows = _table(_section(heading), "input")
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


@pytest.mark.parametrize(
    ("heading", "kind"), [("`ModelResource`", "model_resource"), ("`TrainingSession`", "training_session")]
)
def test_readme_reference_lists_exactly_the_outputs(heading, kind):
    schema, _ = _resource(kind)
    rows = _table(_section(heading), "output")
    documented = {name for row in rows for name in _names(row[0])}

    # What check adds to the inputs is an output too (the estimate, the model resource's declared facts), and
    # so is the declaration the resource class adds.
    assert documented == {"id", *schema.output_keys, *schema.check_added, OWNER_KEY}


@pytest.mark.parametrize(
    ("heading", "name", "constant"),
    [
        ("`ModelResource`", "create_timeout", "MODEL_RESOURCE_CREATE_TIMEOUT"),
        ("`ModelResource`", "delete_timeout", "MODEL_RESOURCE_DELETE_TIMEOUT"),
        ("`TrainingSession`", "create_timeout", "TRAINING_SESSION_CREATE_TIMEOUT"),
        ("`TrainingSession`", "delete_timeout", "TRAINING_SESSION_DELETE_TIMEOUT"),
    ],
)
def test_readme_reference_gives_the_timeout_defaults_of_the_code(heading, name, constant):
    from pulumi_together_rl import config

    row = next(row for row in _table(_section(heading), "input") if _names(row[0]) == [name])
    assert f"default {getattr(config, constant):g}" in row[3]
