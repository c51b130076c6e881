"""DMTCP's options that crac spells otherwise, has no use for, or cannot honour, as a script written
for `dmtcp_launch`, `dmtcp_restart` or `dmtcp_coordinator` passes them: rewritten to crac's before
the CLI parses the line, dropped with a note, or refused with a line that says what to do instead
(docs/CLI.md "DMTCP equivalents")."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass


class SpellingError(Exception):
    """An option crac cannot honour; the message says what to do instead."""


@dataclass(frozen=True)
class Spelling:
    becomes: tuple[str, ...] = ()  # crac's words for it (nothing: dropped)
    takes_value: bool = False  # DMTCP's option is followed by a value, dropped with it
    note: str = ""  # said on stderr when it is dropped
    refuse: str = ""  # why crac cannot do it, and what to use instead
    operand: bool = False  # its value is crac's operand (--restartdir DIR: crac restart DIR)


_NO_TMP = Spelling(note="crac keeps no temporary files outside its images", takes_value=True)
_QUIET = Spelling()  # crac says nothing but warnings and errors already
_NO_PLUGINS = Spelling(note="crac loads no DMTCP plugins; what they virtualize, crac does itself")
_PLUGIN = Spelling(
    takes_value=True,
    refuse="DMTCP plugins do not run under crac (it has its own hooks: docs/API.md)",
)
_RM = Spelling(note="crac needs no resource-manager plugin under Slurm, PBS or LSF")
_IB = Spelling(refuse="crac does not checkpoint InfiniBand verbs; MPI jobs: docs/MPI.md")
_GZIP = Spelling(becomes=("--compress", "zstd"))
_NO_GZIP = Spelling(becomes=("--compress", "none"))

_COMMON = {
    "-q": _QUIET,
    "--quiet": _QUIET,
    "-t": _NO_TMP,
    "--tmpdir": _NO_TMP,
}

SPELLINGS: dict[str, dict[str, Spelling]] = {
    "launch": {
        **_COMMON,
        "--checkpoint-open-files": Spelling(becomes=("--ckpt-open-files",)),
        "--gzip": _GZIP,
        "--no-gzip": _NO_GZIP,
        "--rm": _RM,
        "--batch-queue": _RM,
        "--ib": _IB,
        "--infiniband": _IB,
        "--with-plugin": _PLUGIN,
        "--disable-all-plugins": _NO_PLUGINS,
        "--no-plugins": _NO_PLUGINS,
        "--modify-env": _NO_PLUGINS,
        "--pathvirt": _NO_PLUGINS,
        "--kernel-loader": Spelling(note="crac always runs the program as a split process"),
        "--enable-unique-checkpoint-filenames": Spelling(
            note="every crac generation has a directory of its own (gen-NNNNNN)"
        ),
        "--allow-file-overwrite": Spelling(
            note="a restart puts the files the program held open back as the checkpoint saw "
            "them (crac restart --no-truncate leaves them as they are)"
        ),
        "--port-file": Spelling(
            takes_value=True,
            refuse="start the coordinator with `crac coordinator --daemon -p 0 --port-file F`, "
            'then `crac launch -j -p "$(cat F)" ...`',
        ),
        "--coord-logfile": Spelling(
            takes_value=True,
            refuse="the coordinator a launch starts keeps no log; start one with `crac "
            "coordinator --daemon --log-file F` and launch with -j",
        ),
    },
    "restart": {
        **_COMMON,
        "--restartdir": Spelling(operand=True),
        "-r": Spelling(operand=True),
        "--gzip": _GZIP,
        "--no-gzip": _NO_GZIP,
        "--no-strict-checking": Spelling(
            refuse="crac has no such switch: `crac verify DIR` says why an image is refused, "
            "and --force restarts one whose program or crac changed"
        ),
        "-c": Spelling(
            takes_value=True,
            refuse="a restarted program writes its next images where its image is (its process "
            "directory): move the job's directory first, or restart with --search-dir",
        ),
        "--ckptdir": Spelling(
            takes_value=True,
            refuse="a restarted program writes its next images where its image is (its process "
            "directory): move the job's directory first, or restart with --search-dir",
        ),
    },
    "coordinator": {  # -q/--quiet are crac's own here
        "-t": _NO_TMP,
        "--tmpdir": _NO_TMP,
        "--kill-after-ckpt": Spelling(becomes=("--exit-after-checkpoint",)),
        "-c": Spelling(
            takes_value=True,
            note="crac writes the restart script into the job's checkpoint directory",
        ),
        "--ckptdir": Spelling(
            takes_value=True,
            note="crac writes the restart script into the job's checkpoint directory",
        ),
        "--write-kv-data": Spelling(note="crac's coordinator keeps no key-value data"),
    },
}


def rewrite(
    command: str, args: list[str], takes_value: Collection[str], stop_at_operand: bool
) -> tuple[list[str], list[str]]:
    """ARGS of `crac COMMAND` with DMTCP's spellings made crac's: the new list and the notes to
    print. TAKES_VALUE: crac's own options of COMMAND that take a value (skipped with it).
    STOP_AT_OPERAND: the first word that is no option starts the program's own (launch). Raises
    SpellingError for an option crac cannot honour."""
    table = SPELLINGS.get(command, {})
    out: list[str] = []
    notes: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            return out + args[i:], notes
        name, eq, inline = word.partition("=")
        spelling = table.get(name) if name.startswith("-") else None
        if spelling is None:
            out.append(word)
            if word in takes_value and i + 1 < len(args):
                out.append(args[i + 1])
                i += 1
            elif not word.startswith("-") and stop_at_operand:
                return out + args[i + 1 :], notes
            i += 1
            continue
        if spelling.refuse:
            raise SpellingError(f"{name} is DMTCP's: {spelling.refuse}")
        if spelling.note:
            notes.append(f"{name} is DMTCP's and ignored: {spelling.note}")
        out.extend(spelling.becomes)
        if spelling.operand and eq:
            out.append(inline)
        i += 1 if eq or not spelling.takes_value else 2
    return out, notes
