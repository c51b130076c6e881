"""The `crac` console script: ignore the checkpoint signal before the (slow) imports.

A checkpoint signal sent to a process started with `crac launch` while it is still Python must
not kill it; the loader installs its own handler once it runs. The CLI proper is imported after.
"""

from __future__ import annotations

import os
import signal
import sys

# Set when the checkpoint signal arrived while this was still Python: the loader is then asked
# to checkpoint as soon as the program runs (runner.exec_loader passes --checkpoint-soon).
checkpoint_requested = False


def _note_request(signum: int, frame: object) -> None:
    global checkpoint_requested
    checkpoint_requested = True


def _hold_checkpoint_signal() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in ("launch", "restart"):
        value = os.environ.get("CRAC_SIGCKPT") or os.environ.get("DMTCP_SIGCKPT") or ""
        number = int(value) if value.isdigit() and 0 < int(value) < 65 else signal.SIGUSR2
        if number not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(number, _note_request)


def main() -> None:
    if sys.argv[1:2] == ["command"]:  # scripts poll it: skip typer and the CLI's imports
        from crac_py.command import run

        sys.exit(run(sys.argv[2:]))
    _hold_checkpoint_signal()
    from crac_py.cli import main as cli_main

    cli_main()
