#!/bin/sh
# gpu_check.sh — the cuda backend's proof on a real GPU in one run of a few minutes
# (bench/gpu_check.py says what it checks; docs/CUDA.md "What is verified" records the results).
#
# Run from the repository root, with crac installed in a virtual environment: CRAC_VENV (default
# .venv) must hold `pip install '.[test]'` (pytest drives the checkpoint/restart cycles), e.g.
#   python3 -m venv .venv && .venv/bin/pip install '.[test]' && bench/gpu_check.sh
# Without a GPU it says why and exits 2 at once.
set -eu
cd "$(dirname "$0")/.."
venv=${CRAC_VENV:-.venv}
if [ ! -x "$venv/bin/python" ]; then
    echo "gpu_check: no virtual environment at $venv (set CRAC_VENV; see the header)" >&2
    exit 2
fi
case $venv in
/*) PATH="$venv/bin:$PATH" ;;
*) PATH="$PWD/$venv/bin:$PATH" ;;
esac
export PATH
exec "$venv/bin/python" bench/gpu_check.py "$@"
