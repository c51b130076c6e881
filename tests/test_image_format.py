"""The one definition of the image format (crac_py/image/format.py): the C header generated from it
and the Python reader agree on every record (sizes, offsets, constants, as gcc compiles them), the
layout of format 1 stays what images already written hold, docs/IMAGE.md's tables are the spec's,
and `crac inspect` refuses a damaged device.img with a clear error."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest

from crac_py.image import format as fmt
from crac_py.image import inspect as inspect_image
from crac_py.image.generation import ImageError

ROOT = Path(__file__).resolve().parent.parent

# Record sizes of format 1, as images written before the spec existed hold them (include/
# crac_image.h and image_device.c's private structs of that time). A change here breaks old images.
FORMAT1_SIZES = {
    "crac_process_rec": 64,
    "crac_region_rec": 96,
    "crac_thread_note": 24,
    "crac_fd_rec": 56,
    "crac_pty_rec": 80,
    "crac_signal_rec": 32,
    "crac_timers_rec": 104,
    "crac_posix_timer_rec": 48,
    "crac_pending_rec": 16,
    "crac_pending_thread": 16,
    "crac_pending_info": 128,
    "crac_rlimit_rec": 16,
    "crac_mq_file": 24,
    "crac_mq_msg": 8,
    "crac_dev_header": 32,
    "crac_dev_record": 40,
}


def _python_offsets(rec: fmt.Record) -> dict[str, int]:
    """Field offsets as Python's struct module lays out the reader's format string."""
    codes = rec.struct.format[1:]
    out, at, i = {}, 0, 0
    for f in rec.fields:
        out[f.name] = at
        # one code per field: "<count><char>"
        j = i
        while codes[j].isdigit():
            j += 1
        at += struct.calcsize("<" + codes[i : j + 1])
        i = j + 1
    return out


def test_generated_header_and_reader_agree(tmp_path: Path) -> None:
    gen = fmt.write_c_header(tmp_path / "gen")
    prog = ["#include <stdio.h>", '#include "crac_image.h"', "int main(void)", "{"]
    expected = []
    for r in fmt.RECORDS:
        prog.append(f'    printf("{r.name} %zu\\n", sizeof(struct {r.name}));')
        expected.append(f"{r.name} {r.struct.size}")
        for f in r.fields:
            prog.append(
                f'    printf("{r.name}.{f.name} %zu\\n", offsetof(struct {r.name}, {f.name}));'
            )
            expected.append(f"{r.name}.{f.name} {_python_offsets(r)[f.name]}")
    for e in fmt.ENUMS:
        for cname, value, _, _ in e.values:
            prog.append(f'    printf("{cname} %lld\\n", (long long){cname});')
            expected.append(f"{cname} {value}")
    prog.append('    printf("magic %s\\n", CRAC_DEV_MAGIC);')
    expected.append(f"magic {fmt.DEV_MAGIC.decode()}")
    prog.append('    printf("name %s\\n", CRAC_NOTE_NAME);')
    expected.append(f"name {fmt.NOTE_NAME}")
    prog += ["    return 0;", "}", ""]
    src = tmp_path / "layout.c"
    src.write_text("\n".join(prog))
    exe = tmp_path / "layout"
    cc = subprocess.run(
        ["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", f"-I{ROOT / 'include'}",
         f"-I{gen.parent}", str(src), "-o", str(exe)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert cc.returncode == 0, cc.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == expected


def test_layout_of_format_1_is_kept() -> None:
    """Format 2 changed MANIFEST.json only (upper.core's entry): the records are format 1's."""
    sizes = {r.name: r.size for r in fmt.RECORDS}
    assert {k: sizes.get(k) for k in FORMAT1_SIZES} == FORMAT1_SIZES
    for r in fmt.RECORDS:
        assert r.struct.size == r.size, r.name
    assert fmt.CRAC_IMAGE_FORMAT == 2
    assert [n.type for n in fmt.NOTES][:8] == list(range(0x43520001, 0x43520009))
    # Notes added to format 1 later are optional: images written before them read the same.
    assert all(n.optional for n in fmt.NOTES[8:])


def test_generated_header_is_what_the_build_uses() -> None:
    """build/crac_gen/crac_image_gen.h, when built, is the spec's current text (no stale copy)."""
    built = ROOT / "build" / "crac_gen" / "crac_image_gen.h"
    if not built.exists():
        pytest.skip("native parts not built in this tree")
    assert built.read_text() == fmt.c_header()


def test_every_note_type_has_a_decoder() -> None:
    assert set(inspect_image.DECODERS) == {n.cname for n in fmt.NOTES}


def test_image_md_tables_are_the_spec() -> None:
    """docs/IMAGE.md holds `python -m crac_py.image.format --markdown` between its markers."""
    text = (ROOT / "docs" / "IMAGE.md").read_text()
    begin = "<!-- format.py: begin -->\n"
    end = "<!-- format.py: end -->"
    assert begin in text and end in text, "docs/IMAGE.md lacks the format.py markers"
    section = text.split(begin, 1)[1].split(end, 1)[0]
    assert section == fmt.markdown(), (
        "docs/IMAGE.md is out of date: regenerate its tables with "
        "`python -m crac_py.image.format --markdown`"
    )


def _device_img(path: Path, magic: bytes, n: int, records: int) -> Path:
    head, rec = fmt.RECORD["crac_dev_header"], fmt.RECORD["crac_dev_record"]
    blob = head.struct.pack(magic, fmt.DEV_VERSION, n, 4096, 0, 0)
    blob += b"".join(rec.struct.pack(0x300000000000 + i * 4096, 4096, 4096, 1, 0, 0)
                     for i in range(records))  # fmt: skip
    path.write_bytes(blob)
    return path


def test_device_image_index_is_decoded(tmp_path: Path) -> None:
    dev = inspect_image.device_image(_device_img(tmp_path / "device.img", fmt.DEV_MAGIC, 2, 2))
    assert dev is not None
    assert dev["header"]["n"] == 2 and dev["header"]["magic"] == "CRACDEV1"
    assert [(a["addr"], a["kind_name"]) for a in dev["allocations"]] == [
        (0x300000000000, "device"),
        (0x300000001000, "device"),
    ]
    assert inspect_image.device_image(tmp_path / "absent.img") is None


@pytest.mark.parametrize(
    ("magic", "n", "records", "message"),
    [
        (b"NOTCRAC!", 1, 1, "is not a crac device image"),
        (fmt.DEV_MAGIC, 3, 1, "is truncated inside its index"),
    ],
)
def test_damaged_device_image_is_refused(
    tmp_path: Path, magic: bytes, n: int, records: int, message: str
) -> None:
    path = _device_img(tmp_path / "device.img", magic, n, records)
    with pytest.raises(ImageError, match=message):
        inspect_image.device_image(path)
    path.write_bytes(path.read_bytes()[:10])
    with pytest.raises(ImageError, match="shorter than its header"):
        inspect_image.device_image(path)


def test_truncated_note_is_refused(tmp_path: Path) -> None:
    region = fmt.RECORD["crac_region_rec"]
    with pytest.raises(ImageError, match="regions note .* ends inside crac_region_rec"):
        inspect_image.decode_notes({0x43520002: b"\0" * (region.size - 8)}, tmp_path / "upper.core")
