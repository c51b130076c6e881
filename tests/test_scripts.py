"""Scripts launched as they are (`crac launch ./job.sh`), as DMTCP users launch them: crac runs a
"#!" script as the kernel's exec would (its interpreter, the line's optional argument, the
script's path, its arguments; docs/CLI.md "Scripts"), and the script survives checkpoint ->
SIGKILL -> restart like any program: a shell script with an option on its #! line, and a Python
script whose #! line goes through `env -S` (env execs the interpreter under crac)."""

from __future__ import annotations

import sys
from pathlib import Path

from ckpt_harness import run_cycles
from conftest import APPS_DIR


def test_shell_script_with_an_option_on_its_line(tmp_path):
    """tests/apps/sh/count.sh starts `#!/bin/sh -e` and spins in the shell between steps."""
    run_cycles(APPS_DIR / "sh" / "count.sh", ["300"], tmp_path, cycles=2)


def test_python_script_through_env(tmp_path):
    """`#!/usr/bin/env -S PYTHON -u`: crac loads env, env execs Python in the same process; the
    script keeps an asyncio loop and a selectors loop with bytes in flight across the restarts."""
    source = (APPS_DIR / "py" / "ckpt_selectors.py").read_text()
    script = tmp_path / "selectors_job"
    script.write_text(f"#!/usr/bin/env -S {sys.executable} -u\n{source}")
    script.chmod(0o755)
    run_cycles(Path(script), ["60"], tmp_path, cycles=2)
