"""Option resolution: explicit flag > CRAC_* environment > DMTCP_* environment > default.

Every option crac reads from the environment is declared once in OPTIONS, with its CRAC_* name
first and its DMTCP_* twins (and their old aliases) after it. An empty variable counts as unset.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass


class ConfigError(ValueError):
    """An option has a value crac does not accept; the message names where it came from."""


@dataclass(frozen=True)
class Resolved:
    value: str
    source: str  # "flag", the environment variable's name, or "default"


@dataclass(frozen=True)
class Option:
    flag: str  # the command-line spelling, for messages
    env: tuple[str, ...]  # looked up in this order (CRAC_* first, then DMTCP_*)
    default: str
    choices: tuple[str, ...] | None = None

    def resolve(self, flag_value: str | None, environ: Mapping[str, str] | None = None) -> Resolved:
        environ = os.environ if environ is None else environ
        if flag_value is not None:
            found = Resolved(flag_value, "flag")
        else:
            found = Resolved(self.default, "default")
            for name in self.env:
                value = environ.get(name, "")
                if value != "":
                    found = Resolved(value, name)
                    break
        if self.choices is not None and found.value not in self.choices:
            where = self.flag if found.source == "flag" else found.source
            raise ConfigError(
                f"invalid value {found.value!r} for {where}; use one of: {', '.join(self.choices)}"
            )
        return found


def _twins(suffix: str, *aliases: str) -> tuple[str, ...]:
    return (f"CRAC_{suffix}", f"DMTCP_{suffix}", *aliases)


OPTIONS: dict[str, Option] = {
    "device": Option("--device", ("CRAC_DEVICE",), "auto", ("sim", "cuda", "auto")),
    "coord_host": Option("--coord-host", _twins("COORD_HOST", "DMTCP_HOST"), "localhost"),
    "coord_port": Option("--coord-port", _twins("COORD_PORT", "DMTCP_PORT"), "7779"),
    # crac's own (DMTCP has no shared secret): required by a coordinator on another interface.
    "coord_token": Option("--coord-token", ("CRAC_COORD_TOKEN", "DMTCP_COORD_TOKEN"), ""),
    "checkpoint_dir": Option("--ckptdir", _twins("CHECKPOINT_DIR"), "."),
    "checkpoint_interval": Option("--interval", _twins("CHECKPOINT_INTERVAL"), "0"),
    "sigckpt": Option("--ckpt-signal", _twins("SIGCKPT"), "12"),
}


def resolve(
    name: str, flag_value: str | None, environ: Mapping[str, str] | None = None
) -> Resolved:
    """Resolve the option called name (a key of OPTIONS)."""
    return OPTIONS[name].resolve(flag_value, environ)
