"""`--compress none|lz4|zstd[:LEVEL]` (docs/IMAGE.md "Compressed regions"): images whose regions
are stored as compressed chunks restart with the program's results unchanged, a damaged chunk is
refused cleanly, a missing codec library is said in one line, and uncompressed images still
restart."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from ckpt_harness import (
    assert_refused,
    base_env,
    build_app,
    crac,
    launch_image,
    run_cycles,
)
from conftest import crac_cmd, describe

from crac_py.image import format as image_format

APP = Path(__file__).parent / "apps" / "ckpt_compress.c"
ZSTD = "/usr/lib/x86_64-linux-gnu/libzstd.so.1"
CHUNK = struct.Struct("<IIQIIII")  # struct crac_chunk_hdr


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_app(tmp_path_factory, APP)


def regions(gen: Path) -> list[dict]:
    cp = subprocess.run(
        [*crac_cmd(), "inspect", "--json", str(gen)], capture_output=True, timeout=120
    )
    assert cp.returncode == 0, describe(cp)
    return json.loads(cp.stdout)["notes"]["regions"]


def chunks(gen: Path) -> list[tuple[int, tuple]]:
    """(file offset, header fields) of every chunk of every compressed region."""
    data = (gen / "upper.core").read_bytes()
    found = []
    for r in regions(gen):
        if not r["flags"] & image_format.REGION_COMPRESSED:
            continue
        pos = r["core_offset"]
        while True:
            h = CHUNK.unpack_from(data, pos)
            assert h[0] == image_format.CHUNK_MAGIC, (gen, r, pos)
            if h[3] == 0:
                break
            found.append((pos, h))
            pos += CHUNK.size + h[6] + (h[4] + 7) // 8 * 8
    return found


def damaged_copy(gen: Path, where: Path, at: int) -> Path:
    """A copy of generation GEN under WHERE with one bit of upper.core's byte AT flipped."""
    bad = where / gen.name
    shutil.copytree(gen, bad)
    with open(bad / "upper.core", "r+b") as f:
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0x40]))
    return bad


def one_image(app: Path, tmp_path: Path, mode: str) -> Path:
    """A generation of the program, written with --compress MODE; the program SIGKILLed."""
    ckptdir = tmp_path / "ckpt"
    ckptdir.mkdir()
    opts = ["--compress", mode]
    return launch_image(app, ["400", "4", "20"], ckptdir, out_dir=tmp_path, opts=opts)


@pytest.mark.parametrize("mode", ["lz4", "zstd", "zstd:3"])
def test_two_cycles(app: Path, tmp_path: Path, mode: str) -> None:
    res = run_cycles(
        app,
        ["300", "8", "20"],
        tmp_path,
        launch_opts=["--compress", mode],
        restart_opts=["--compress", mode],
    )
    method = image_format.CHUNK_LZ4 if mode == "lz4" else image_format.CHUNK_ZSTD
    for gen in res.gens:
        manifest = json.loads((gen / "MANIFEST.json").read_text())
        assert manifest["format_version"] == image_format.CRAC_IMAGE_FORMAT_COMPRESSED
        found = chunks(gen)
        methods = {h[1] for _, h in found}
        # Text and mostly-zero pages compress; the random pages are stored raw after the trial.
        assert method in methods and image_format.CHUNK_RAW in methods, (gen, methods)
        assert methods <= {method, image_format.CHUNK_RAW}
        # The long raw chunks went O_DIRECT (the default forked writer): a gap puts their bytes
        # on a page; no other chunk has one.
        direct = [(p, h) for p, h in found if h[1] == image_format.CHUNK_RAW and h[3] >= 64]
        assert direct, (gen, "no raw chunk of 64 pages or more")
        assert all((p + CHUNK.size + h[6]) % 4096 == 0 for p, h in direct), gen
        assert all(h[6] == 0 for p, h in found if (p, h) not in direct), gen
        # 32 MiB of data, a quarter of it random: far less than the pages it holds.
        assert (gen / "upper.core").stat().st_size < 16 << 20, gen


def test_uncompressed_image_restarts_into_compressed(app: Path, tmp_path: Path) -> None:
    """An image without compression (format 2, as before) restarts, and the restarted program's
    next generation is compressed (the restart's --compress)."""
    res = run_cycles(app, ["300", "4", "20"], tmp_path, restart_opts=["--compress", "zstd"])
    formats = [json.loads((g / "MANIFEST.json").read_text())["format_version"] for g in res.gens]
    assert formats == [image_format.CRAC_IMAGE_FORMAT, image_format.CRAC_IMAGE_FORMAT_COMPRESSED]
    assert chunks(res.gens[0]) == [] and chunks(res.gens[1]) != []


def test_damaged_chunk_refused(app: Path, tmp_path: Path) -> None:
    gen = one_image(app, tmp_path, "zstd")
    pos, h = next((p, h) for p, h in chunks(gen) if h[1] == image_format.CHUNK_ZSTD)
    for what, at in (("stored bytes", pos + CHUNK.size + h[4] // 2), ("header", pos + 8)):
        bad = damaged_copy(gen, tmp_path / what.replace(" ", "_"), at)
        line = assert_refused(crac("restart", str(bad), cwd=tmp_path), f"restart, {what}")
        assert "corrupted" in line, line
        cp = crac("verify", str(bad), cwd=tmp_path)
        assert cp.returncode == 2 and b"VALID" not in cp.stdout.replace(b"INVALID", b""), describe(
            cp
        )
        err = [ln for ln in cp.stderr.decode().splitlines() if ln.strip()]
        assert len(err) == 1 and err[0].startswith("crac: error: "), describe(cp)
    # The image itself is sound: it restarts (the damage above was the only difference).
    cp = crac("restart", str(gen), cwd=tmp_path)
    assert cp.returncode == 0 and b"DONE" in cp.stdout, describe(cp)


def test_large_regions_filled_in_two_parts(app: Path, tmp_path: Path) -> None:
    """Regions of 64 MiB (RESTART_SPLIT_MIN, loader/restart/restart.h) are filled by two threads
    where there are two CPUs, the second walking the first half's chunk headers without their
    bytes (loader/restart/restart_memory.c fill_chunks): the program's results are unchanged, and
    damaged stored bytes in either half, or a damaged header of the half only walked by the second
    thread, are refused."""
    res = run_cycles(
        app, ["150", "64", "20"], tmp_path, cycles=1, launch_opts=["--compress", "lz4"]
    )
    gen = res.gens[0]
    data = (gen / "upper.core").read_bytes()
    big = [
        r
        for r in regions(gen)
        if r["flags"] & image_format.REGION_COMPRESSED and r["end"] - r["start"] >= 64 << 20
    ]
    assert big, (gen, "no compressed region of 64 MiB")
    r = big[0]
    half = (r["end"] - r["start"]) // 4096 // 2
    pos, first, second = r["core_offset"], [], []
    while (h := CHUNK.unpack_from(data, pos))[3]:
        (first if h[2] < half else second).append((pos, h))
        pos += CHUNK.size + h[6] + (h[4] + 7) // 8 * 8
    assert first and second, (gen, r)
    (p1, h1), (p2, h2) = first[len(first) // 2], second[len(second) // 2]
    damage = {
        "stored bytes, first half": p1 + CHUNK.size + h1[6] + h1[4] // 2,
        "stored bytes, second half": p2 + CHUNK.size + h2[6] + h2[4] // 2,
        "header, first half": p1 + 8,
    }
    for what, at in damage.items():
        bad = damaged_copy(gen, tmp_path / what.replace(" ", "_").replace(",", ""), at)
        line = assert_refused(crac("restart", str(bad), cwd=tmp_path), f"restart, {what}")
        assert "corrupted" in line, (what, line)


def _without_zstd(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """argv run where libzstd.so.1 cannot be loaded: a private mount namespace with /dev/null
    mounted over the library (nothing in crac is told)."""
    for unshare in (["unshare", "-rm"], ["unshare", "-m"]):
        probe = subprocess.run([*unshare, "true"], capture_output=True, timeout=60)
        if probe.returncode == 0:
            break
    else:
        pytest.skip("no mount namespace can be made here (unshare -m refused)")
    if not Path(ZSTD).exists():
        pytest.skip(f"{ZSTD} is not where this test hides it")
    script = f'mount --bind /dev/null {ZSTD} || exit 99; exec "$@"'
    cp = subprocess.run(
        [*unshare, "sh", "-c", script, "sh", *argv],
        capture_output=True,
        env=base_env(),
        cwd=cwd,
        timeout=300,
    )
    if cp.returncode == 99:
        pytest.skip(f"cannot mount over {ZSTD} in a mount namespace: {cp.stderr!r}")
    return cp


def test_missing_library(app: Path, tmp_path: Path) -> None:
    gen = one_image(app, tmp_path, "zstd")
    cp = _without_zstd([*crac_cmd(), "restart", str(gen)], tmp_path)
    line = assert_refused(cp, "restart of a zstd image without libzstd")
    assert "libzstd.so.1" in line, line
    cp = _without_zstd([*crac_cmd(), "launch", "--compress", "zstd", "--", str(app)], tmp_path)
    line = assert_refused(cp, "launch --compress zstd without libzstd")
    assert "libzstd.so.1" in line, line
    # lz4 does not need it.
    cp = _without_zstd(
        [*crac_cmd(), "launch", "--compress", "lz4", "--", str(app), "3", "1", "0"], tmp_path
    )
    assert cp.returncode == 0 and b"DONE" in cp.stdout, describe(cp)


@pytest.mark.parametrize("value", ["gzip", "zstd:0", "zstd:20", "zstd:x", ""])
def test_bad_value(app: Path, tmp_path: Path, value: str) -> None:
    line = assert_refused(crac("launch", "--compress", value, "--", str(app), cwd=tmp_path))
    assert "--compress" in line and "use one of: none, lz4, zstd" in line, line


def test_dmtcp_gzip() -> None:
    """DMTCP_GZIP is honoured when neither --compress nor CRAC_COMPRESS is given."""
    from crac_py import config

    assert config.compress_spec(None, {}) == "none"
    assert config.compress_spec(None, {"DMTCP_GZIP": "0"}) == "none"
    assert config.compress_spec(None, {"DMTCP_GZIP": "1"}) == "zstd"
    assert config.compress_spec(None, {"DMTCP_GZIP": "1", "CRAC_COMPRESS": "lz4"}) == "lz4"
    assert config.compress_spec("none", {"DMTCP_GZIP": "1"}) == "none"
    with pytest.raises(config.ConfigError, match="CRAC_COMPRESS"):
        config.compress_spec(None, {"CRAC_COMPRESS": "gzip"})


@pytest.mark.parametrize("mode", ["lz4", "zstd:3"])
def test_exec_keeps_compression(app: Path, tmp_path: Path, mode: str) -> None:
    """A job script that execs its program (`sh -c 'exec ./app'`): the program's images are
    compressed as the launch asked (the exec'd loader was given no --compress, and wrote them
    raw)."""
    ckptdir = tmp_path / "ckpt"
    ckptdir.mkdir()
    argv = ["-c", f'exec "{app}" 400 4 20']
    gen = launch_image(Path("/bin/sh"), argv, ckptdir, out_dir=tmp_path, opts=["--compress", mode])
    manifest = json.loads((gen / "MANIFEST.json").read_text())
    assert manifest["process"]["program"] == str(app), manifest["process"]
    assert manifest["format_version"] == image_format.CRAC_IMAGE_FORMAT_COMPRESSED, manifest
    method = image_format.CHUNK_LZ4 if mode == "lz4" else image_format.CHUNK_ZSTD
    assert method in {h[1] for _, h in chunks(gen)}, gen
