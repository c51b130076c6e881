"""The options `crac launch` and `crac restart` share, defined once (typer Annotated types)."""

from __future__ import annotations

from typing import Annotated

import typer

CkptDirOpt = Annotated[
    str | None,
    typer.Option(
        "--ckptdir", "-c", help="Where images go (env CRAC_CHECKPOINT_DIR, DMTCP_CHECKPOINT_DIR)."
    ),
]
IntervalOpt = Annotated[
    int | None,
    typer.Option(
        "--interval",
        "-i",
        help="Checkpoint every S seconds (env CRAC_/DMTCP_CHECKPOINT_INTERVAL; 0 = never).",
    ),
]
KeepOpt = Annotated[int, typer.Option("--keep", min=1, help="Generations to keep.")]
ExitAfterOpt = Annotated[
    bool, typer.Option("--exit-after-checkpoint", help="Exit once the next checkpoint is written.")
]
VerboseOpt = Annotated[
    bool,
    typer.Option(
        "--verbose", "-v", help="One line per checkpoint (generation, size, pause, time)."
    ),
]
NoForkWriterOpt = Annotated[
    bool,
    typer.Option(
        "--no-fork-writer",
        help="Write each image with the program paused, not by a forked copy-on-write writer "
        "(env CRAC_NO_FORK_WRITER=1).",
    ),
]
CompressOpt = Annotated[
    str | None,
    typer.Option(
        "--compress",
        metavar="none|lz4|zstd[:LEVEL]",
        help="Compress images in chunks on worker threads (env CRAC_COMPRESS; DMTCP_GZIP=0/1 "
        "means none/zstd; default none).",
    ),
]
LazyOpt = Annotated[
    bool,
    typer.Option(
        "--lazy",
        help="Run as soon as the threads are back: memory is read on first touch and by a "
        "background prefetcher (env CRAC_LAZY_RESTART=1).",
    ),
]
CkptOpenFilesOpt = Annotated[
    bool,
    typer.Option(
        "--ckpt-open-files",
        help="Keep a copy of every file the program writes in each image, whatever its size "
        "(env CRAC_/DMTCP_CKPT_OPEN_FILES=1; default: those with up to 64 MiB of data); a "
        "restart goes on with it.",
    ),
]
IncrementalOpt = Annotated[
    bool,
    typer.Option(
        "--incremental",
        help="Incremental images: a generation holds only the pages written since the one "
        "before (env CRAC_INCREMENTAL=1); a restart goes on with it.",
    ),
]
FullEveryOpt = Annotated[
    int | None,
    typer.Option(
        "--full-every",
        min=2,
        max=1 << 20,
        help="With --incremental: every Nth generation is full (default 8).",
    ),
]
SimVersionOpt = Annotated[
    int | None,
    typer.Option("--sim-version", min=1, max=2, help="Version of the sim device to load."),
]
CudaRuntimeOpt = Annotated[
    str | None,
    typer.Option(
        "--cuda-runtime",
        metavar="PATH|12|13",
        help="NVIDIA's libcudart for --device cuda: a path or a major version (default 13).",
    ),
]
# Coordinator options of launch and restart (job.py): none of them and no CRAC_/DMTCP_COORD_*
# variable = no coordinator (a single process checkpointed through its own signal).
CoordHostOpt = Annotated[
    str | None,
    typer.Option(
        "--coord-host", "--host", help="Coordinator host (env CRAC_/DMTCP_COORD_HOST; localhost)."
    ),
]
CoordPortOpt = Annotated[
    int | None,
    typer.Option(
        "--coord-port", "--port", "-p", help="Coordinator port (env CRAC_/DMTCP_COORD_PORT; 7779)."
    ),
]
CoordTokenOpt = Annotated[
    str | None,
    typer.Option("--coord-token", help="The coordinator's shared secret (env CRAC_COORD_TOKEN)."),
]
CoordTokenFileOpt = Annotated[
    str | None,
    typer.Option(
        "--coord-token-file",
        help="Read the shared secret from this file (env CRAC_COORD_TOKEN_FILE).",
    ),
]
JoinOpt = Annotated[
    bool,
    typer.Option("--join-coordinator", "--join", "-j", help="Join a running coordinator."),
]
NewCoordOpt = Annotated[
    bool,
    typer.Option("--new-coordinator", help="Start a coordinator (daemon, --exit-on-last)."),
]
AnyCoordOpt = Annotated[
    bool,
    typer.Option("--any-coordinator", help="Join the coordinator at host:port, else start one."),
]
# restart only: a file the program reads that changed since the checkpoint (docs/TRUST.md).
AllowChangedOpt = Annotated[
    bool,
    typer.Option(
        "--allow-changed-files",
        help="Go on when a file the program reads changed since the checkpoint (a warning each).",
    ),
]
NoCoordOpt = Annotated[
    bool, typer.Option("--no-coordinator", help="Run alone (the default without coord options).")
]
