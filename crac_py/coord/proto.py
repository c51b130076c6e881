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
    ("resume", "resume", "published", "PUBLISHING"),
)
ANSWERS = frozenset({"suspended", "written", "published", "failed"})

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
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ProtocolError("not JSON") from None
    if not isinstance(msg, dict):
        raise ProtocolError("not a JSON object")
    return msg


def normalize_verb(word: str) -> str | None:
    """The canonical verb for a DMTCP-style spelling (`s`, `-s`, `--status`), else None."""
    return _SPELLINGS.get(word.lstrip("-").lower())
