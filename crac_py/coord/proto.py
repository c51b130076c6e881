"""Shared pieces of the coordinator protocol (docs/PROTOCOL.md): framing, limits, the verbs of
`crac command` and their DMTCP spellings."""

from __future__ import annotations

import json
from typing import Any

DEFAULT_PORT = 7779
LOOPBACK = "127.0.0.1"
MAX_LINE = 64 * 1024  # bytes in one message line, newline excluded

# Phases of a job checkpoint: (phase name, message sent, answer awaited, peer state while waiting).
PHASES = (
    ("checkpoint", "checkpoint", "suspended", "SUSPENDING"),
    ("write", "write", "written", "WRITING"),
    # The programs run again; each process's image is still being written (its forked writer)
    # until it answers `durable`. Nobody publishes before everyone is durable, so a process lost
    # in between leaves the whole job at its previous generation.
    ("resume", "resume", "durable", "FLUSHING"),
    ("publish", "publish", "published", "PUBLISHING"),
)
ANSWERS = frozenset({"suspended", "written", "durable", "published", "failed"})

# crac command verbs: canonical name -> spellings (leading dashes are stripped before lookup).
VERBS: dict[str, tuple[str, ...]] = {
    "status": ("s", "status"),
    "list": ("l", "list"),
    "checkpoint": ("c", "checkpoint"),
    "bcheckpoint": ("bc", "bcheckpoint"),
    "kcheckpoint": ("kc", "kcheckpoint", "ck"),
    "interval": ("i", "interval"),
    "kill": ("k", "kill"),
    "quit": ("q", "quit"),
    # Not a DMTCP verb: the restart script announces how many processes will join, so that no
    # checkpoint starts before all of them are back (DMTCP's restart quorum).
    "expect": ("expect",),
}
_SPELLINGS = {s: verb for verb, names in VERBS.items() for s in names}
# Old DMTCP spellings that no longer exist, with what to use instead.
OLD_VERBS = {"xc": "kc (checkpoint and kill)", "xcheckpoint": "kcheckpoint"}
LONG_REPLY_VERBS = frozenset({"bcheckpoint", "kcheckpoint"})


# Ranges of the numbers in messages: anything else is refused, so no value can overflow a
# timer or a float later (a 400-digit interval used to wedge the next checkpoint).
MAX_INTERVAL = 1 << 30  # seconds, as `crac launch -i`
MAX_PID = (1 << 31) - 1
MAX_GENERATION = (1 << 31) - 1
MAX_EXPECT = 1 << 20  # processes a restart may announce


def int_in(value: Any, lo: int, hi: int) -> bool:
    """Whether VALUE is an int (not a bool) within LO..HI."""
    return isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi


class ProtocolError(ValueError):
    """A message that is not one JSON object on one line of at most MAX_LINE bytes."""


def encode(msg: dict[str, Any]) -> bytes:
    data = json.dumps(msg, separators=(",", ":")).encode() + b"\n"
    if len(data) > MAX_LINE + 1:
        raise ProtocolError(f"message of {len(data)} bytes is longer than {MAX_LINE}")
    return data


def decode(line: bytes) -> dict[str, Any]:
    if len(line.rstrip(b"\n")) > MAX_LINE:
        raise ProtocolError(f"line longer than {MAX_LINE} bytes")
    try:
        msg = json.loads(line)
    except (ValueError, RecursionError):
        # Not JSON, not UTF-8, an integer of more than 4300 digits, nesting deeper than the
        # parser's recursion: all the same to the protocol.
        raise ProtocolError("not JSON (or nested or numbered beyond what crac reads)") from None
    if not isinstance(msg, dict):
        raise ProtocolError("not a JSON object")
    return msg


def normalize_verb(word: str) -> str | None:
    """The canonical verb for a DMTCP-style spelling (`s`, `-s`, `--status`), else None."""
    return _SPELLINGS.get(word.lstrip("-").lower())
