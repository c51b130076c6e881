"""The Python side of the `crac` command: keep the checkpoint signal blocked, then the CLI.

A checkpoint signal sent to a process started with `crac launch`/`crac restart` while it is still
starting must neither kill it nor be lost. A blocked signal stays blocked, and pending, across
execve (a handler does not survive it): the native `crac` command (front/crac_front.c) blocks it
at its entry point and execs Python; this module blocks it again for `python -m crac_py` (where
Python's own start-up comes first, unprotected), and the loader takes the pending signal once the
program can be checkpointed (docs/DECISIONS.md). The CLI proper is imported after.
"""

from __future__ import annotations

import sys

from crac_py import ckpt_signal  # noqa: F401  (blocks the checkpoint signal at import)


def main() -> None:
    try:
        if sys.argv[1:2] == ["command"]:  # scripts poll it: skip typer and the CLI's imports
            from crac_py.cli.command import run

            sys.exit(run(sys.argv[2:]))
        if sys.argv[1:2] == ["coordinator"]:  # a tree's first fork waits for it: the same
            from crac_py.coord import quick

            status = quick.main(sys.argv[2:])
            if status is not None:
                sys.exit(status)
        from crac_py.cli.main import main as cli_main

        cli_main()
    except KeyboardInterrupt:  # Ctrl-C before the program runs: quiet, as a shell tool
        sys.exit(130)
