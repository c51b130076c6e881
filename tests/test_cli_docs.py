"""docs/CLI.md documents every option `crac COMMAND --help` lists, in that command's section (the
coordinator options of launch and restart in their shared section)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import crac_cmd

CLI_MD = Path(__file__).resolve().parent.parent / "docs" / "CLI.md"
SHARED = "## Coordinator options of crac launch and crac restart"
OPTION_RE = re.compile(r"(?<![\w-])(--?[a-zA-Z][a-zA-Z0-9-]*)")


def section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end >= 0 else len(text)]


def help_options(command: str) -> set[str]:
    env = dict(os.environ, COLUMNS="200", NO_COLOR="1", TERM="dumb")
    out = subprocess.run(
        [*crac_cmd(), command, "--help"], capture_output=True, text=True, env=env, timeout=60
    ).stdout
    options = set()
    for line in out.splitlines():
        cells = line.strip("│ ").split()
        if cells and cells[0].startswith("-"):  # the option column of a row of the table
            for cell in cells[:2]:
                options.update(o for o in OPTION_RE.findall(cell) if o != "--help")
    return options


@pytest.mark.parametrize(
    "command",
    ["launch", "restart", "coordinator", "verify", "inspect", "doctor", "kernels", "compact"],
)
def test_every_help_option_is_documented(command):
    text = CLI_MD.read_text()
    documented = section(text, f"## crac {command}\n")
    if command in ("launch", "restart"):
        documented += section(text, SHARED)
    options = help_options(command)
    assert options, f"no option found in `crac {command} --help`"
    missing = sorted(o for o in options if f"`{o}" not in documented)
    assert not missing, f"docs/CLI.md's `crac {command}` section lacks {missing}"


def test_every_command_has_a_section():
    """Every command `crac --help` lists has its `## crac COMMAND` section."""
    env = dict(os.environ, COLUMNS="200", NO_COLOR="1", TERM="dumb")
    out = subprocess.run(
        [*crac_cmd(), "--help"], capture_output=True, text=True, env=env, timeout=60
    ).stdout
    box = out[out.index("Commands") :]
    box = box[: box.index("╰")]
    # A command's row starts right after the border; its description's next lines are indented.
    names = {m.group(1) for m in re.finditer(r"^│ ([a-z]+) ", box, re.MULTILINE)}
    assert "compact" in names and "launch" in names, names
    text = CLI_MD.read_text()
    missing = sorted(n for n in names if f"## crac {n}\n" not in text)
    assert not missing, f"docs/CLI.md has no section for {missing}"
