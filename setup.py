"""setuptools glue: build_ext compiles crac's native parts with build_native.build().

Metadata lives in pyproject.toml. crac's native parts are not Python extensions (an executable
and a preloaded .so), so instead of Extension objects the distribution claims to have extension
modules (which makes `build` run build_ext and the wheel platform-specific) and build_ext.run is
replaced by a call to build_native.build():

* regular builds (`pip install .`, wheels):  <build_lib>/crac_py/_native
* in-place / editable builds (`pip install -e .`, `setup.py build_ext -i`): crac_py/_native
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


setup(distclass=BinaryDistribution, cmdclass={"build_ext": BuildNative})
