"""`crac coordinator` in the forms crac runs itself, without the CLI's imports: a tree's first fork
starts one (loader/ckpt/tree_coord.c) and the restart script does (restart_script.py), and the
program waits for it. Any other form, `--help` included, goes to the CLI (crac_py/cli/main.py)."""

from __future__ import annotations

import sys
from pathlib import Path

FLAGS = {
    "--daemon": "daemon",
    "--exit-on-last": "exit_on_last",
    "--exit-after-checkpoint": "exit_after_checkpoint",
    "--exit-after-ckpt": "exit_after_checkpoint",
    "-q": "quiet",
    "--quiet": "quiet",
}
VALUES = {"-p": "port", "--port-file": "port_file", "-i": "interval", "--stale-timeout": "stale"}


def _parse(argv: list[str]) -> dict[str, str | bool] | None:
    out: dict[str, str | bool] = {}
    args = iter(argv)
    for arg in args:
        if arg in FLAGS:
            out[FLAGS[arg]] = True
        elif arg in VALUES and VALUES[arg] not in out:
            value = next(args, None)
            if value is None or value.startswith("-"):
                return None
            out[VALUES[arg]] = value
        else:
            return None
    return out


def main(argv: list[str]) -> int | None:
    """Runs the coordinator and returns its exit status, or None when ARGV is not a form this
    handles (or has a value the CLI should report)."""
    opts = _parse(argv)
    if opts is None:
        return None
    try:
        port = int(str(opts["port"])) if "port" in opts else None
        interval = int(str(opts["interval"])) if "interval" in opts else None
        stale = float(str(opts["stale"])) if "stale" in opts else None
    except ValueError:
        return None  # the CLI says what is wrong with it
    if stale is not None and stale < 0:
        return None
    from crac_py import config
    from crac_py.coord import run as coord_run

    defaults = coord_run.RunOptions
    try:
        resolved = coord_run.resolve_options(
            port=port,
            host=defaults.host,
            token=None,
            token_file=None,
            port_file=Path(str(opts["port_file"])) if "port_file" in opts else None,
            status_file=None,
            log_file=None,
            daemon=bool(opts.get("daemon")),
            exit_on_last=bool(opts.get("exit_on_last")),
            exit_after_checkpoint=bool(opts.get("exit_after_checkpoint")),
            interval=interval,
            phase_timeout=defaults.phase_timeout,
            stale_timeout=defaults.stale_timeout if stale is None else stale,
            quiet=bool(opts.get("quiet")),
            idle_timeout=defaults.idle_timeout,
        )
        return coord_run.run(resolved)
    except (config.ConfigError, coord_run.CoordStartError) as exc:
        print(f"crac: error: {exc}", file=sys.stderr, flush=True)
        return 2
