"""Compile crac's native parts (the loader executable and the upper-half runtime) with gcc.

Used by setup.py's build_ext, and runnable by hand:

    python build_native.py [OUT_DIR]        # default: crac_py/_native

Each target is one entry of TARGETS: its source globs (relative to the repository root) and its
gcc flags. A target whose source list is empty is skipped, so a partial tree still builds.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent
DEFAULT_OUT = ROOT / "crac_py" / "_native"

COMMON_CFLAGS: tuple[str, ...] = (
    "-std=c11",
    "-D_GNU_SOURCE",
    "-O2",
    "-g",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-fno-stack-protector",
)


@dataclass(frozen=True)
class Target:
    """One gcc invocation: SOURCES -> OUT/output."""

    output: str
    source_globs: tuple[str, ...]
    cflags: tuple[str, ...]
    ldflags: tuple[str, ...] = ()
    libs: tuple[str, ...] = ()

    def sources(self, root: Path = ROOT) -> list[str]:
        """Source paths relative to root; each glob sorted, globs kept in the given order."""
        found: list[str] = []
        for pattern in self.source_globs:
            found.extend(sorted(str(p.relative_to(root)) for p in root.glob(pattern)))
        return found

    def command(self, out_dir: Path, root: Path = ROOT) -> list[str]:
        return [
            "gcc",
            *self.cflags,
            *self.ldflags,
            "-Iinclude",
            *self.sources(root),
            "-o",
            str(out_dir / self.output),
            *self.libs,
        ]


TARGETS: dict[str, Target] = {
    "crac-loader": Target(
        output="crac-loader",
        source_globs=("loader/*.c", "lowerhalf/*.c"),
        cflags=(*COMMON_CFLAGS, "-fno-pie"),
        ldflags=("-no-pie", "-Wl,-Ttext-segment=0x10000000"),
        libs=("-lpthread", "-ldl"),
    ),
    "libcrac-upper.so": Target(
        output="libcrac-upper.so",
        source_globs=("upperhalf/*.c",),
        cflags=(*COMMON_CFLAGS, "-fPIC"),
        ldflags=("-shared",),
        libs=("-lpthread",),
    ),
}


class NativeBuildError(RuntimeError):
    """gcc failed; the message carries the command and the compiler's output."""


def build(out_dir: Path = DEFAULT_OUT, root: Path = ROOT) -> list[Path]:
    """Build every target with sources into out_dir; return the paths built."""
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    built: list[Path] = []
    for name, target in TARGETS.items():
        if not target.sources(root):
            print(f"build_native: skipping {name}: no sources match {list(target.source_globs)}")
            continue
        cmd = target.command(out_dir, root)
        print(shlex.join(cmd), flush=True)
        try:
            proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
        except FileNotFoundError as exc:
            raise NativeBuildError(f"gcc not found ({exc}); install gcc to build crac") from exc
        if proc.stdout or proc.stderr:
            sys.stdout.write(proc.stdout + proc.stderr)
        if proc.returncode != 0:
            raise NativeBuildError(
                f"building {name} failed (gcc exit {proc.returncode}):\n"
                f"{shlex.join(cmd)}\n{proc.stdout}{proc.stderr}"
            )
        built.append(out_dir / target.output)
    return built


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else DEFAULT_OUT
    try:
        build(out)
    except NativeBuildError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
