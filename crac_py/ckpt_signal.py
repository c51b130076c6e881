"""The checkpoint signal kept blocked while `crac launch`/`crac restart` start (docs/DECISIONS.md,
"Checkpoint signal"): the guess of which signal it is, read before the CLI is imported, and the
one this process blocked. A leaf module: crac_py/_entry.py imports it first, the launch code later.
"""

from __future__ import annotations

import os
import signal
import sys

DEFAULT_CKPT_SIGNAL = 12


def _signal_number(value: str) -> int | None:
    try:
        number = int(value)
    except ValueError:
        return None
    return number if 0 < number < 65 and number not in (9, 19) else None


def guess_ckpt_signal(argv: list[str], environ: os._Environ[str] | dict[str, str]) -> int:
    """The checkpoint signal as the CLI will resolve it (flag > CRAC_SIGCKPT > DMTCP_SIGCKPT >
    12), read cheaply before the CLI is imported. `crac restart` uses the image's signal, which
    runner.exec_loader blocks too once the image is read."""
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        value = None
        if arg == "--ckpt-signal" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--ckpt-signal="):
            value = arg.partition("=")[2]
        if value is not None and (number := _signal_number(value)) is not None:
            return number
    for name in ("CRAC_SIGCKPT", "DMTCP_SIGCKPT"):
        value = environ.get(name, "")
        if value != "":
            return _signal_number(value) or DEFAULT_CKPT_SIGNAL
    return DEFAULT_CKPT_SIGNAL


# The signal this module blocked (None: this is not a launch or restart).
held_signal: int | None = None


def _hold_checkpoint_signal() -> None:
    global held_signal
    if len(sys.argv) > 1 and sys.argv[1] in ("launch", "restart"):
        # Ctrl-C before the program runs: out at once and quietly (a KeyboardInterrupt can land
        # where Python prints and ignores it); the exec resets the handler for the program.
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, lambda number, frame: os._exit(130))
        held_signal = guess_ckpt_signal(sys.argv[2:], os.environ)
        signal.pthread_sigmask(signal.SIG_BLOCK, {held_signal})


# At import: crac_py/_entry.py imports this module before anything else of crac.
_hold_checkpoint_signal()
