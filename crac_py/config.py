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
    # Checked by compress_spec (zstd:LEVEL is open-ended); DMTCP_GZIP is read there too.
    "compress": Option("--compress", ("CRAC_COMPRESS",), "none"),
    # crac restart --lazy (memory filled on first touch and by a prefetcher): 0 or 1.
    "lazy_restart": Option("--lazy", ("CRAC_LAZY_RESTART",), "0", ("0", "1")),
    # --incremental (docs/IMAGE.md "Incremental generations"); --full-every N with it.
    "incremental": Option("--incremental", ("CRAC_INCREMENTAL",), "0", ("0", "1")),
    # --ckpt-open-files: a copy of every written file in the image, whatever its size.
    "ckpt_open_files": Option("--ckpt-open-files", _twins("CKPT_OPEN_FILES"), "0"),
}

FULL_EVERY_DEFAULT = 8


def incremental_spec(flag: bool, full_every: int | None, compress: str) -> int:
    """The loader's --incremental value: 0 (every generation full) or K (every Kth full, the
    others hold only the pages written since the one before). CRAC_INCREMENTAL=1 turns it on."""
    on = OPTIONS["incremental"].resolve("1" if flag else None).value == "1"
    if not on:
        if full_every is not None:
            raise ConfigError("--full-every is for --incremental")
        return 0
    return FULL_EVERY_DEFAULT if full_every is None else full_every


def ckpt_open_files_spec(
    flag: bool, recorded: bool = False, environ: Mapping[str, str] | None = None
) -> bool:
    """--ckpt-open-files: the flag, else CRAC_CKPT_OPEN_FILES, else DMTCP_CKPT_OPEN_FILES (set to
    anything but 0: on, as DMTCP takes it), else what the image recorded (a restart goes on)."""
    found = OPTIONS["ckpt_open_files"].resolve("1" if flag else None, environ)
    if found.source == "default":
        return recorded
    return found.value.strip() != "0"


def compress_spec(flag_value: str | None, environ: Mapping[str, str] | None = None) -> str:
    """The --compress value: none, lz4, zstd or zstd:LEVEL (1..19).

    DMTCP_GZIP (DMTCP's switch for gzip'd images) is honoured when neither the flag nor
    CRAC_COMPRESS is given: 0 means none, any other value the default compressed method (zstd).
    """
    environ = os.environ if environ is None else environ
    found = OPTIONS["compress"].resolve(flag_value, environ)
    if found.source == "default" and environ.get("DMTCP_GZIP", "") != "":
        found = Resolved("none" if environ["DMTCP_GZIP"].strip() == "0" else "zstd", "DMTCP_GZIP")
    value = found.value
    method, _, level = value.partition(":")
    ok = value in ("none", "lz4", "zstd") or (
        method == "zstd" and level.isdigit() and 1 <= int(level) <= 19
    )
    if not ok:
        where = OPTIONS["compress"].flag if found.source == "flag" else found.source
        raise ConfigError(
            f"invalid value {value!r} for {where}; use one of: none, lz4, zstd, zstd:LEVEL (1..19)"
        )
    return value


def resolve(
    name: str, flag_value: str | None, environ: Mapping[str, str] | None = None
) -> Resolved:
    """Resolve the option called name (a key of OPTIONS)."""
    return OPTIONS[name].resolve(flag_value, environ)


def int_option(name: str, flag_value: int | None, lo: int, hi: int) -> int:
    """The option called NAME (flag, else environment, else default) as an integer in lo..hi;
    ConfigError naming where a bad value came from."""
    resolved = resolve(name, None if flag_value is None else str(flag_value))
    try:
        value = int(resolved.value)
    except ValueError:
        value = lo - 1
    if not lo <= value <= hi:
        where = OPTIONS[name].flag if resolved.source == "flag" else resolved.source
        raise ConfigError(f"invalid value {resolved.value!r} for {where}; use {lo}..{hi}")
    return value
