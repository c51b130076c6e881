"""A JVM program (Debian's OpenJDK) through two checkpoint -> SIGKILL -> restart cycles: HotSpot's
own threads (JIT compilers, G1's collectors, its signal dispatcher), a small heap collected
often, an NIO selector thread serving loopback connections, a thread pool and a file
(tests/apps/java/CkptJava.java, compiled with javac here), with another JVM run while it is down."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from ckpt_harness import run_cycles
from conftest import APPS_DIR


@pytest.fixture(scope="module")
def java_classes(tmp_path_factory) -> Path:
    java, javac = shutil.which("java"), shutil.which("javac")
    if not java or not javac:
        pytest.skip("java and javac are not installed (Debian: default-jdk-headless)")
    out = tmp_path_factory.mktemp("java")
    src = APPS_DIR / "java" / "CkptJava.java"
    res = subprocess.run([javac, "-d", str(out), str(src)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return out


def test_java_program(java_classes, tmp_path):
    java = Path(shutil.which("java") or "java")
    args = ["-Xmx64m", "-XX:+UseG1GC", "-cp", str(java_classes), "CkptJava", "60", "{work}"]
    # Another JVM started while the job is down removes the hsperfdata file of the killed pid
    # (/tmp/hsperfdata_<user>/<pid>, which the job maps shared): the restart makes it again.
    run_cycles(java, args, tmp_path, cycles=2, between=lambda _work: other_jvm(java))


def other_jvm(java: Path) -> None:
    subprocess.run([java, "-version"], capture_output=True, check=True, timeout=120)
