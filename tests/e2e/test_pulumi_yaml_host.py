"""The Pulumi YAML language host of scripts/pulumi-yaml.sh runs a YAML program through the real CLI.

The host comes from the `yaml_bin` fixture (tests/conftest.py), which runs the script (it builds the host into
the cache when missing, and puts it next to the CLI of `pulumi_bin`); the CLI from `pulumi_bin`; the stack from `cli_stack` (a file backend and PULUMI_HOME
in the test's temporary folder). Without a host or a CLI the test is skipped with the reason, or fails where
TOGETHER_RL_REQUIRE_CLI=1, like every CLI test.
"""

from __future__ import annotations

import os

PROGRAM = "name: t\nruntime: yaml\noutputs:\n  greeting: hello\n"


def test_yaml_program_runs_with_the_provided_host(cli_stack, pulumi_bin, yaml_bin, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "Pulumi.yaml").write_text(PROGRAM)
    stack = cli_stack(project)
    stack.env["PATH"] = os.pathsep.join([pulumi_bin, yaml_bin, stack.env["PATH"]])

    stack.run("stack", "init", "--secrets-provider", "passphrase")
    stack.initialized = True  # the fixture destroys and removes it whatever happens
    up = stack.up()
    # The host is next to the CLI (`--beside`): the CLI takes it as its own, with no warning about it.
    assert "using pulumi-language-yaml from $PATH" not in up.output, up.output
    assert stack.run("stack", "output", "greeting").stdout.strip() == "hello"
    stack.run("destroy", "--yes", "--skip-preview")
    assert stack.outputs() == {}
