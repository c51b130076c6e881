"""Node.js (Debian's `node`) through two checkpoint -> SIGKILL -> restart cycles: V8 gives its
heap and code pages MADV_DONTFORK, which a forked checkpoint writer does not see unless crac
lifts it for the fork (docs/DECISIONS.md "Fork advice"); a worker thread, OpenSSL and libuv's
thread pool run beside it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from ckpt_harness import run_cycles
from conftest import APPS_DIR


@pytest.fixture(scope="module")
def node() -> Path:
    found = shutil.which("node")
    if not found:
        pytest.skip("node is not installed (Debian: apt-get install nodejs)")
    return Path(found)


def test_node_program(node, tmp_path):
    run_cycles(node, [str(APPS_DIR / "js" / "ckpt_node.js"), "60", "{work}"], tmp_path, cycles=2)
