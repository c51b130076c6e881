"""setuptools glue: build_ext compiles crac's native parts with build_native.build().

Metadata lives in pyproject.toml. crac's native parts are not Python extensions (an executable
and a preloaded .so), so instead of Extension objects the distribution claims to have extension
modules (which makes `build` run build_ext and the wheel platform-specific) and build_ext.run is
replaced by a call to build_native.build():

* regular builds (`pip install .`, wheels):  <build_lib>/crac_py/_native
* in-place / editable builds (`pip install -e .`, `setup.py build_ext -i`): crac_py/_native

The `crac` command itself is one of those native parts (front/), installed by build_scripts.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import build_native  # noqa: E402


class BinaryDistribution(Distribution):
    def has_ext_modules(self) -> bool:
        return True


class BuildNative(build_ext):
    """Compile the loader and the upper runtime instead of Python extensions."""

    def _out_dir(self) -> Path:
        if self.inplace or getattr(self, "editable_mode", False):
            return HERE / "crac_py" / "_native"
        return Path(self.build_lib) / "crac_py" / "_native"

    def run(self) -> None:
        build_native.build(self._out_dir(), HERE)

    def get_outputs(self) -> list[str]:
        out = self._out_dir()
        return [os.fspath(out / t.output) for t in build_native.TARGETS.values() if t.sources(HERE)]

    def get_source_files(self) -> list[str]:
        return [src for t in build_native.TARGETS.values() for src in t.sources(HERE)]


# setuptools has no build_scripts of its own (it is distutils'); ask for whichever it uses.
build_scripts = Distribution().get_command_class("build_scripts")


class BuildFront(build_scripts):  # type: ignore[misc, valid-type]
    """The `crac` command is native (front/crac_front.c, built by build_ext with the rest): it is
    copied as it is, not a Python script whose #! line would be adjusted. It replaces the console
    script an entry point would give, which starts Python before it can block the checkpoint
    signal (docs/DECISIONS.md)."""

    def run(self) -> None:
        native = self.get_finalized_command("build_ext")
        self.run_command("build_ext")
        front = native._out_dir() / "crac"
        out = Path(self.build_dir)
        out.mkdir(parents=True, exist_ok=True)
        self.copy_file(os.fspath(front), os.fspath(out / "crac"))
        os.chmod(out / "crac", 0o755)


setup(
    distclass=BinaryDistribution,
    cmdclass={"build_ext": BuildNative, "build_scripts": BuildFront},
    scripts=["front/crac_front.c"],
)
