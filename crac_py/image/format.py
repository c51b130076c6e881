"""The one definition of crac's binary image format: every record of upper.core's "CRAC" notes and
of device.img, their note types and the constants they use (docs/IMAGE.md, docs/DECISIONS.md).

From this spec build_native.py generates the C header build/crac_gen/crac_image_gen.h (structs,
enums, `_Static_assert`s on every size and offset; include/crac_image.h includes it), `crac
inspect` builds its `struct.Struct`s (`Record.struct`), and `python -m crac_py.image.format
--markdown` prints the record tables of docs/IMAGE.md (a test keeps them equal). Every field is
little-endian at its natural alignment; a record's size is a multiple of 8 and has no implicit
padding (the generated asserts and `Record.offsets` check it). Change the layout only together
with CRAC_IMAGE_FORMAT: images already written must keep reading the same.
"""

from __future__ import annotations

import struct
import sys
from dataclasses import dataclass
from pathlib import Path

# C type, struct code, size (natural alignment = size)
CTYPES: dict[str, tuple[str, str, int]] = {
    "u8": ("uint8_t", "B", 1),
    "char": ("char", "c", 1),
    "i32": ("int32_t", "i", 4),
    "u32": ("uint32_t", "I", 4),
    "i64": ("int64_t", "q", 8),
    "u64": ("uint64_t", "Q", 8),
}


@dataclass(frozen=True)
class Field:
    name: str
    ctype: str  # a key of CTYPES
    doc: str = ""
    dims: tuple[int, ...] = ()  # array dimensions; u8/char arrays read as bytes

    @property
    def count(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n

    @property
    def size(self) -> int:
        return CTYPES[self.ctype][2] * self.count

    @property
    def is_bytes(self) -> bool:
        return self.ctype in ("u8", "char") and bool(self.dims)


@dataclass(frozen=True)
class Record:
    name: str  # the C struct tag
    size: int  # asserted in C and here
    doc: str
    fields: tuple[Field, ...]

    @property
    def offsets(self) -> dict[str, int]:
        out, at = {}, 0
        for f in self.fields:
            align = CTYPES[f.ctype][2]
            if at % align:
                raise ValueError(f"{self.name}.{f.name}: implicit padding before it")
            out[f.name] = at
            at += f.size
        if at != self.size:
            raise ValueError(f"{self.name}: fields add up to {at}, spec says {self.size}")
        return out

    @property
    def struct(self) -> struct.Struct:
        self.offsets  # noqa: B018 - validates the layout
        codes = []
        for f in self.fields:
            code = CTYPES[f.ctype][1]
            codes.append(f"{f.count}s" if f.is_bytes else f"{f.count}{code}")
        return struct.Struct("<" + "".join(codes))

    def unpack(self, blob: bytes, off: int = 0) -> dict[str, object]:
        """The record at OFF of BLOB as {field: value}; arrays as lists (nested per dims)."""
        values = list(self.struct.unpack_from(blob, off))
        out: dict[str, object] = {}
        for f in self.fields:
            if f.is_bytes or not f.dims:
                out[f.name] = values.pop(0)
                continue
            flat, values = values[: f.count], values[f.count :]
            out[f.name] = _nest(flat, f.dims)
        return out


def _nest(flat: list[object], dims: tuple[int, ...]) -> object:
    if len(dims) == 1:
        return flat
    step = len(flat) // dims[0]
    return [_nest(flat[i * step : (i + 1) * step], dims[1:]) for i in range(dims[0])]


@dataclass(frozen=True)
class Enum:
    name: str  # the C enum tag
    doc: str
    values: tuple[tuple[str, int, str, str], ...]  # (C name, value, label, doc)

    def value(self, cname: str) -> int:
        return next(v for c, v, _, _ in self.values if c == cname)

    @property
    def labels(self) -> dict[int, str]:
        return {v: label for _, v, label, _ in self.values}


@dataclass(frozen=True)
class Note:
    cname: str  # CRAC_NT_...
    type: int
    content: str  # what the note's descriptor holds, in order (records named)
    optional: bool = False


CRAC_IMAGE_FORMAT = 2  # 2: upper.core checked by its CRC-32C only (crc32c_regions)
NOTE_NAME = "CRAC"
DEV_MAGIC = b"CRACDEV1"
DEV_VERSION = 1
N_RLIMITS = 16
N_SIGNAL_RECS = 65  # indexed by signal number: 0 unused, then 1..64
REGION_OUTSIDE_W, REGION_NORESERVE, REGION_DONTDUMP = 1, 2, 4
REGION_SHARED_ALIAS = 8
# Format 3: an image with compressed regions (--compress); format 2 images are written without it
# and both are read (docs/IMAGE.md "Compressed regions").
CRAC_IMAGE_FORMAT_COMPRESSED = 3
REGION_COMPRESSED = 16
CHUNK_MAGIC = 0x4B435243  # "CRCK" little-endian
CHUNK_RAW, CHUNK_LZ4, CHUNK_ZSTD = 0, 1, 2
CHUNK_MAX_PAGES = 256  # 1 MiB of raw pages per chunk
# Format 4: an incremental generation (--incremental): its CRAC_REGION_INCREMENTAL regions take the
# pages of their bitmap from the parent generation the PARENT note names (docs/IMAGE.md
# "Incremental generations").
CRAC_IMAGE_FORMAT_INCREMENTAL = 4
REGION_INCREMENTAL = 32
# A shared mapping of a file that lives in memory (tmpfs: /dev/shm, a named semaphore): saved like
# shared anonymous memory and written back into the file at restart (docs/IMAGE.md "Regions").
REGION_SHMEM_FILE = 64
# A writable shared mapping of a small regular file elsewhere (a JVM's hsperfdata): its pages are
# saved and put back into the file at restart, made again where it is gone (docs/IMAGE.md).
REGION_FILE_KEPT = 128

# (C name, value, doc) -> #define NAME value
DEFINES: tuple[tuple[str, str, str], ...] = (
    ("CRAC_IMAGE_FORMAT", str(CRAC_IMAGE_FORMAT), "MANIFEST.json format_version, PROCESS format"),
    ("CRAC_NOTE_NAME", f'"{NOTE_NAME}"', "the ELF note name of crac's notes"),
    ("CRAC_REGION_OUTSIDE_W", f"{REGION_OUTSIDE_W}u", "region flag: a recorded mapping outside W"),
    (
        "CRAC_REGION_NORESERVE",
        f"{REGION_NORESERVE}u",
        'region flag: MAP_NORESERVE ("nr" in smaps VmFlags)',
    ),
    (
        "CRAC_REGION_DONTDUMP",
        f"{REGION_DONTDUMP}u",
        'region flag: MADV_DONTDUMP ("dd"): contents not saved, zeros after a restart',
    ),
    (
        "CRAC_REGION_SHARED_ALIAS",
        f"{REGION_SHARED_ALIAS}u",
        "region flag: ANON_SHARED mapping of an object (dev, ino) an earlier region maps too, "
        "over the same pages: not saved again, shared with it after a restart",
    ),
    (
        "CRAC_IMAGE_FORMAT_COMPRESSED",
        str(CRAC_IMAGE_FORMAT_COMPRESSED),
        "format_version/PROCESS format of an image with CRAC_REGION_COMPRESSED regions",
    ),
    (
        "CRAC_REGION_COMPRESSED",
        f"{REGION_COMPRESSED}u",
        "region flag: its saved pages are a stream of crac_chunk_hdr chunks at core_offset",
    ),
    ("CRAC_CHUNK_MAGIC", f"0x{CHUNK_MAGIC:08x}u", 'crac_chunk_hdr.magic ("CRCK")'),
    (
        "CRAC_IMAGE_FORMAT_INCREMENTAL",
        str(CRAC_IMAGE_FORMAT_INCREMENTAL),
        "format_version/PROCESS format of an incremental generation (a PARENT note)",
    ),
    (
        "CRAC_REGION_INCREMENTAL",
        f"{REGION_INCREMENTAL}u",
        "region flag: ANON region whose bitmap lists the pages taken from the parent generation's "
        "region of the same range; the others are saved here (non-zero) or zero",
    ),
    (
        "CRAC_REGION_SHMEM_FILE",
        f"{REGION_SHMEM_FILE}u",
        "region flag: FILE_SHARED mapping of a file on tmpfs (/dev/shm): its pages are saved "
        "(zero pages not) and written back into the file, made again if gone, at restart",
    ),
    (
        "CRAC_REGION_FILE_KEPT",
        f"{REGION_FILE_KEPT}u",
        "region flag: writable FILE_SHARED mapping of a regular file of at most 4 MiB not on "
        "tmpfs: its pages are saved (zero pages not) and put back into the file at restart, "
        "which makes it again where it is gone",
    ),
    ("CRAC_CHUNK_RAW", str(CHUNK_RAW), "chunk method: the pages stored as they are"),
    ("CRAC_CHUNK_LZ4", str(CHUNK_LZ4), "chunk method: LZ4 block (LZ4_compress_fast)"),
    ("CRAC_CHUNK_ZSTD", str(CHUNK_ZSTD), "chunk method: one zstd frame"),
    ("CRAC_CHUNK_MAX_PAGES", str(CHUNK_MAX_PAGES), "pages of one chunk at most (1 MiB)"),
    ("CRAC_N_RLIMITS", str(N_RLIMITS), "RLIMIT_CPU (0) .. RLIMIT_RTTIME (15)"),
    ("CRAC_N_SIGNAL_RECS", str(N_SIGNAL_RECS), "SIGNALS note records, by signal number (0 unused)"),
    ("CRAC_DEV_MAGIC", f'"{DEV_MAGIC.decode()}"', "device.img's first 8 bytes"),
    ("CRAC_DEV_VERSION", str(DEV_VERSION), "device.img's header version"),
)

NOTES: tuple[Note, ...] = (
    Note(
        "CRAC_NT_PROCESS",
        0x43520001,
        "crac_process_rec, then the cwd (NUL-terminated, padded to 8: cwd_len bytes)",
    ),  # fmt: skip
    Note(
        "CRAC_NT_REGIONS",
        0x43520002,
        "per region: crac_region_rec, its path (path_len "
        "bytes), its bitmap (bitmap_bytes); `size` is the whole",
    ),  # fmt: skip
    Note("CRAC_NT_THREADS", 0x43520003, "one crac_thread_note per thread"),
    Note(
        "CRAC_NT_FDS",
        0x43520004,
        "per descriptor: crac_fd_rec, its path (path_len bytes), "
        "for PTY kinds a crac_pty_rec; `size` is the whole",
    ),  # fmt: skip
    Note(
        "CRAC_NT_SIGNALS",
        0x43520005,
        "65 crac_signal_rec indexed by signal number (0 unused, then 1..64)",
    ),
    Note("CRAC_NT_TIMERS", 0x43520006, "crac_timers_rec, then n_posix crac_posix_timer_rec"),
    Note(
        "CRAC_NT_PENDING",
        0x43520007,
        "crac_pending_rec, then n_threads crac_pending_thread, then n_infos crac_pending_info, "
        "then each thread's n_infos crac_pending_info",
    ),
    Note(
        "CRAC_NT_RLIMITS",
        0x43520008,
        "16 crac_rlimit_rec, RLIMIT_CPU .. RLIMIT_RTTIME",
        optional=True,
    ),  # fmt: skip
    Note(
        "CRAC_NT_FILE_IDS",
        0x43520020,
        "per regular file open read-only (fds 3 and up): crac_file_id_rec, its path (path_len "
        "bytes); `size` is the whole; checked at restart (docs/TRUST.md)",
        optional=True,
    ),  # fmt: skip
    Note("CRAC_NT_PRCTL", 0x43520021, "one crac_prctl_rec", optional=True),
    Note(
        "CRAC_NT_PARENT",
        0x4352001F,
        "one crac_parent_rec: the generation an incremental one builds on (format 4 only)",
        optional=True,
    ),
    Note(
        "CRAC_NT_SECCOMP",
        0x43520022,
        "crac_seccomp_rec, then per filter in installation order a crac_seccomp_filter_rec "
        "and its n_insns BPF instructions (8 bytes each), then n_threads "
        "crac_seccomp_thread_rec (docs/TRUST.md)",
        optional=True,
    ),  # fmt: skip
    Note(
        "CRAC_NT_PAGE_CRCS",
        0x4352001E,
        "per ANON region saved page by page in a generation of an --incremental run, in REGIONS "
        "order: crac_page_crcs_rec, then one u32 per page of the region (the CRC-32C of its 4096 "
        "bytes as this generation holds it: of zeros when it holds none; 0 for a page of the "
        "bitmap of an incremental region, the parent's), padded to 8",
        optional=True,
    ),  # fmt: skip
    Note(
        "CRAC_NT_FILE_LOCKS",
        0x43520023,
        "one crac_file_lock_rec per lock the program held (fcntl/lockf, OFD, flock), taken "
        "again at restart on its descriptor",
        optional=True,
    ),
    Note(
        "CRAC_NT_THREAD_SCHED",
        0x43520024,
        "one crac_thread_sched_rec per thread: its nice value and scheduling policy, given "
        "back at restart",
        optional=True,
    ),
)
NOTE_TYPES = {n.type: n for n in NOTES}

ENUMS: tuple[Enum, ...] = (
    Enum("crac_note_type", "type of a note named CRAC",
         tuple((n.cname, n.type, n.cname.removeprefix("CRAC_NT_").lower(), "") for n in NOTES)),
    Enum("crac_region_kind", "crac_region_rec.kind", (
        ("CRAC_REGION_ANON", 1, "anonymous",
         "private anonymous: saved non-zero pages, the rest zero"),
        ("CRAC_REGION_ANON_SHARED", 2, "shared anonymous",
         "shared anonymous (or deleted file): saved like ANON"),
        ("CRAC_REGION_FILE_PRIVATE", 3, "private file",
         "private file mapping: pages in the bitmap are saved, the rest come from the file, "
         "whose identity must match"),
        ("CRAC_REGION_FILE_SHARED", 4, "shared file",
         "shared file mapping: nothing saved, the file is the data"),
    )),
    Enum("crac_fd_kind", "crac_fd_rec.kind", (
        ("CRAC_FD_FILE", 1, "file", "regular file, reopened by path"),
        ("CRAC_FD_DIR", 2, "directory", ""),
        ("CRAC_FD_CHAR", 3, "device", "character device, reopened by path"),
        ("CRAC_FD_PIPE", 4, "pipe", "recreated, its ends given back, contents refilled"),
        ("CRAC_FD_STDIO", 5, "stdio", "0, 1, 2 when not regular files: the restart's own"),
        ("CRAC_FD_EVENTFD", 6, "eventfd",
         "its counter and semaphore flag in files/eventfd-<fd> (none in older images: 0)"),
        ("CRAC_FD_UNSUPPORTED", 7, "not restorable",
         "packet sockets, ...: replaced by /dev/null at restart, with a warning"),
        ("CRAC_FD_MQUEUE", 8, "message queue",
         "POSIX message queue: attributes and messages in files/mq-<fd>"),
        ("CRAC_FD_PTY_MASTER", 9, "pty master",
         "pseudo-terminal master (its slave here, or another process's; what it had not read "
         "in files/pty-<index>):"),
        ("CRAC_FD_PTY_SLAVE", 10, "pty slave", "a new pair at restart; a crac_pty_rec follows"),
        ("CRAC_FD_TIMERFD", 11, "timerfd",
         "clock, flags, time left, interval and ticks in files/timerfd-<fd>"),
        ("CRAC_FD_SIGNALFD", 12, "signalfd", "its mask in files/signalfd-<fd>"),
        ("CRAC_FD_EPOLL", 13, "epoll",
         "its interest list in files/epoll-<fd>, added back once every fd is back"),
        ("CRAC_FD_INOTIFY", 14, "inotify",
         "its watches (number, mask, path) in files/inotify-<fd>"),
        ("CRAC_FD_SOCKET", 15, "socket",
         "Unix/TCP/UDP: what it is in files/socket-<fd>, its queued bytes in files/sockq-<fd>"),
        ("CRAC_FD_FIFO", 16, "fifo",
         "named pipe, opened again by path; its bytes in files/pipe-<ino> like a pipe's"),
        ("CRAC_FD_PIDFD", 17, "pidfd",
         "the pid the program knew and its start time in files/pidfd-<fd>, opened again on it"),
        ("CRAC_FD_STDIO_COPY", 18, "stdio copy",
         "a descriptor above 2 on the invocation's own stdin, stdout or stderr (`exec 3>&1`): "
         "the restart's own; `size_at_ckpt` says which (0-2)"),
        ("CRAC_FD_NETLINK", 19, "netlink",
         "netlink socket: protocol, port id, groups and options in files/netlink-<fd>, made "
         "again; what it had not read is not kept"),
    )),
    Enum("crac_dev_kind", "crac_dev_record.kind", (
        ("CRAC_DEV_DEVICE", 1, "device", "device memory (cudaMalloc)"),
        ("CRAC_DEV_MANAGED", 2, "managed", "managed memory (cudaMallocManaged)"),
    )),
)  # fmt: skip
ENUM = {e.name: e for e in ENUMS}

F = Field
RECORDS: tuple[Record, ...] = (
    Record("crac_process_rec", 64, "PROCESS note: the process as a whole", (
        F("format", "u32", "CRAC_IMAGE_FORMAT"),
        F("pid", "u32", "as the program knows it (the pid of the first launch)"),
        F("registry", "u64", "address of the upper half's registry"),
        F("w_start", "u64", "the window W"), F("w_end", "u64"),
        F("d_start", "u64", "the device window D"), F("d_end", "u64"),
        F("generation", "i32"), F("ckpt_signal", "i32"), F("umask", "u32"),
        F("cwd_len", "u32", "the cwd string (NUL-terminated, padded to 8) follows"),
    )),
    Record("crac_region_rec", 96, "REGIONS note: one mapping of the upper half", (
        F("size", "u32", "of this record, path and bitmap included"),
        F("kind", "u32", "enum crac_region_kind"),
        F("start", "u64"), F("end", "u64"),
        F("prot", "u32", "PROT_* bits"),
        F("flags", "u32", "CRAC_REGION_OUTSIDE_W, CRAC_REGION_NORESERVE, CRAC_REGION_DONTDUMP, "
          "CRAC_REGION_SHARED_ALIAS, CRAC_REGION_COMPRESSED, CRAC_REGION_INCREMENTAL, "
          "CRAC_REGION_SHMEM_FILE, CRAC_REGION_FILE_KEPT"),
        F("core_offset", "u64", "where the region's pages start in upper.core (0: nothing saved)"),
        F("file_offset", "u64", "for file kinds: offset of start in the file"),
        F("dev", "u64", "file identity, checked at restart; ANON_SHARED: the shared object's "
          "(regions of the same one are shared again)"), F("ino", "u64"),
        F("file_size", "u64"), F("mtime_ns", "i64"),
        F("crc32c", "u32", "over every saved page: 8-byte page index, then 4096 bytes; "
          "COMPRESSED: over its chunks' crc32c, each as 4 bytes"),
        F("saved_pages", "u32"),
        F("path_len", "u32", "NUL-terminated path follows, padded to 8"),
        F("bitmap_bytes", "u32", "FILE_PRIVATE: one bit per page (1 = saved), after the path"),
    )),
    Record("crac_thread_note", 24, "THREADS note: one thread", (
        F("tid", "i32", "as the program knows it (the id of the first launch)"),
        F("real_tid", "i32", "the kernel's at checkpoint time"),
        F("is_main", "i32"), F("pad", "i32"),
        F("rec", "u64", "address of its crac_thread_rec in the registry (upper memory)"),
    )),
    Record("crac_fd_rec", 56, "FDS note: one file descriptor", (
        F("size", "u32", "of this record, path and crac_pty_rec included"),
        F("kind", "u32", "enum crac_fd_kind"),
        F("fd", "i32"),
        F("open_flags", "u32", "from fdinfo, O_CLOEXEC included"),
        F("pos", "u64"), F("size_at_ckpt", "u64", "PIPE: 1 at fd 0-2 on the invocation's own "
          "pipe (the restart's own then), 0 otherwise; STDIO_COPY: which stdio (0-2)"),
        F("ino", "u64", "pipes: the pipe inode pairs the two ends"),
        F("mode", "u32", "st_mode"),
        F("saved", "u32", "1: contents saved as files/fd-<fd> (unlinked or small written file)"),
        F("unlinked", "u32"),
        F("path_len", "u32", "path follows, padded to 8 (`/proc/<own pid>` written `/proc/self`)"),
    )),
    Record("crac_pty_rec", 80, "FDS note, after the path of a PTY record: the pair's number at "
           "checkpoint (pairs the fds) and the slave's settings (glibc struct termios, struct "
           "winsize of x86-64, as raw bytes)", (
        F("index", "u32"), F("have_termios", "u32"),
        F("termios", "u8", "", (60,)), F("winsize", "u8", "", (8,)), F("pad", "u32"),
    )),
    Record("crac_signal_rec", 32, "SIGNALS note: kernel struct sigaction of one signal", (
        F("handler", "u64"), F("flags", "u64"), F("restorer", "u64"), F("mask", "u64"),
    )),
    Record("crac_timers_rec", 104, "TIMERS note: interval timers, then n_posix POSIX timers", (
        F("itimer", "u64", "ITIMER_REAL/VIRTUAL/PROF: interval sec, usec, value sec, usec",
          (3, 4)),
        F("n_posix", "u32"), F("pad", "u32"),
    )),
    Record("crac_posix_timer_rec", 48, "TIMERS note: one POSIX timer", (
        F("id", "i32"), F("clockid", "i32"), F("signo", "i32"),
        F("notify", "i32", "SIGEV_SIGNAL / SIGEV_NONE / SIGEV_THREAD_ID"),
        F("notify_tid", "i32"), F("pad", "i32"),
        F("sigval", "u64"), F("interval_ns", "i64"), F("value_ns", "i64"),
    )),
    Record("crac_pending_rec", 16, "PENDING note: signals pending at checkpoint time, "
           "process-wide; n_threads crac_pending_thread follow, then n_infos crac_pending_info, "
           "then each thread's own n_infos crac_pending_info, thread by thread; a signal with "
           "infos is queued again with them at restart (rt_sigqueueinfo, rt_tgsigqueueinfo to "
           "the thread), one without (an image from before the counts, whose pads were 0) raised "
           "once with kill() or tgkill()", (
        F("shared", "u64"), F("n_threads", "u32"),
        F("n_infos", "u32", "queued instances of the shared signals, in dequeue order"),
    )),
    Record("crac_pending_thread", 16, "PENDING note: one thread's pending signals", (
        F("tid", "i32", "as the program knows it"),
        F("n_infos", "u32", "queued instances of its own signals, in its dequeue order"),
        F("mask", "u64"),
    )),
    Record("crac_pending_info", 128, "PENDING note: one queued instance of a pending signal "
           "(the process's or a thread's own)", (
        F("info", "u8", "the kernel siginfo_t rt_sigtimedwait gave (si_signo first)", (128,)),
    )),
    Record("crac_rlimit_rec", 16, "RLIMITS note: one resource limit as getrlimit gives it", (
        F("cur", "u64"), F("max", "u64"),
    )),
    Record("crac_file_id_rec", 112, "FILE_IDS note: what a file the program reads was at "
           "checkpoint time, so a restart notices it changed", (
        F("size", "u32", "of this record and its path"),
        F("fd", "i32"),
        F("dev", "u64"), F("ino", "u64"),
        F("file_size", "u64"), F("mtime_ns", "i64"),
        F("hashed", "u32", "1: sha256 holds the contents' SHA-256 (files up to 64 KiB); 2: that "
          "of its last 4 KiB (larger files: one only appended to since is read on)"),
        F("path_len", "u32", "NUL-terminated path follows, padded to 8"),
        F("sha256", "char", "hex, no NUL", (64,)),
    )),
    Record("crac_thread_sched_rec", 16, "THREAD_SCHED note: one thread's nice value and "
           "scheduling policy (Linux keeps both per thread)", (
        F("tid", "i32", "as the program knows it"),
        F("nice", "i32", "getpriority(PRIO_PROCESS, tid): -20..19"),
        F("policy", "i32", "sched_getscheduler: SCHED_*, SCHED_RESET_ON_FORK included"),
        F("priority", "i32", "sched_param.sched_priority (real-time policies)"),
    )),
    Record("crac_file_lock_rec", 32, "FILE_LOCKS note: a lock the program held, as "
           "/proc/self/fdinfo showed it on the descriptor it was taken through", (
        F("fd", "i32"),
        F("kind", "u32", "1 POSIX (fcntl F_SETLK, lockf: the process's), 2 OFD (F_OFD_SETLK: "
          "the open file's), 3 FLOCK (flock)"),
        F("write", "u32", "1: a write (exclusive) lock; 0: a read (shared) one"),
        F("pad", "u32"),
        F("start", "u64", "first byte locked (0 for FLOCK)"),
        F("len", "u64", "bytes locked; 0: to the end of the file, however long"),
    )),
    Record("crac_prctl_rec", 24, "PRCTL note: process attributes the program set with prctl, "
           "restored before its threads", (
        F("dumpable", "i32", "PR_GET_DUMPABLE"),
        F("no_new_privs", "i32", "the main thread's (NoNewPrivs in /proc)"),
        F("child_subreaper", "i32", "PR_GET_CHILD_SUBREAPER"),
        F("pad", "i32"),
        F("timerslack_ns", "u64", "the main thread's timer slack"),
    )),
    Record("crac_seccomp_rec", 16, "SECCOMP note: the program's own seccomp filters and the "
           "per-thread and process prctl state crac records as the program sets it", (
        F("n_filters", "u32", "at most 64"), F("n_threads", "u32"),
        F("thp_disable", "i32", "PR_GET_THP_DISABLE"),
        F("mdwe", "i32", "PR_GET_MDWE's flags (0 where the kernel has none)"),
    )),
    Record("crac_seccomp_filter_rec", 16, "SECCOMP note: one filter as the program installed it", (
        F("flags", "u32", "its SECCOMP_FILTER_FLAG_*"),
        F("n_insns", "u32", "1..4096 struct sock_filter follow"),
        F("tid", "i32", "the installing thread, as the program knows it"),
        F("pad", "u32"),
    )),
    Record("crac_seccomp_thread_rec", 32, "SECCOMP note: one thread's filters and prctl state", (
        F("tid", "i32", "as the program knows it"),
        F("pdeathsig", "i32", "PR_SET_PDEATHSIG, re-armed at restart"),
        F("filters", "u64", "bit i: the thread has filter i"),
        F("name", "char", "PR_SET_NAME (its comm), NUL-terminated", (16,)),
    )),
    Record("crac_mq_file", 24, "files/mq-<fd>: this header, then per message (highest priority "
           "first, FIFO within one) a crac_mq_msg and its bytes padded to 8", (
        F("maxmsg", "i64"), F("msgsize", "i64"), F("curmsgs", "i64"),
    )),
    Record("crac_mq_msg", 8, "files/mq-<fd>: one message's header", (
        F("prio", "u32"), F("len", "u32"),
    )),
    Record("crac_dev_header", 32, "device.img at offset 0", (
        F("magic", "char", 'CRAC_DEV_MAGIC, "CRACDEV1"', (8,)),
        F("version", "u32", "CRAC_DEV_VERSION"),
        F("n", "u32", "number of crac_dev_record that follow the header"),
        F("data_start", "u64", "header and records rounded up to 4096 (zero padding)"),
        F("index_crc", "u32", "CRC-32C of this header (index_crc 0), the records and padding"),
        F("pad", "u32"),
    )),
    Record("crac_chunk_hdr", 32, "upper.core, a compressed region's data: one chunk, gap zero "
           "bytes, then its stored bytes padded to 8; a chunk of n_pages 0 ends the region", (
        F("magic", "u32", "CRAC_CHUNK_MAGIC"),
        F("method", "u32", "CRAC_CHUNK_RAW, CRAC_CHUNK_LZ4 or CRAC_CHUNK_ZSTD"),
        F("first_page", "u64", "index in the region of the chunk's first page"),
        F("n_pages", "u32", "consecutive saved pages (0: the region's last chunk, nothing stored)"),
        F("stored_len", "u32", "bytes stored after the header (n_pages * 4096 when raw)"),
        F("crc32c", "u32", "CRC-32C of the chunk's n_pages * 4096 raw (decompressed) bytes"),
        F("gap", "u32", "zero bytes between this header and the stored bytes (< 4096; a RAW "
          "chunk written O_DIRECT starts on a page)"),
    )),
    Record("crac_parent_rec", 24, "PARENT note: the generation an incremental generation's "
           "CRAC_REGION_INCREMENTAL regions take their other pages from, in the same process "
           "directory", (
        F("generation", "i32", "the parent: gen-<generation>, the previous generation"),
        F("base", "i32", "the full generation the chain starts at"),
        F("header_crc32c", "u32", "the parent's upper_core.header_crc32c (its identity)"),
        F("pad", "u32"),
        F("core_size", "u64", "the parent's upper_core.size"),
    )),
    Record("crac_page_crcs_rec", 16, "PAGE_CRCS note: the region whose page CRC-32Cs follow "
           "(a restart from a chain reads only the pages no newer generation holds, each checked "
           "by itself)", (
        F("start", "u64", "as the region's crac_region_rec"),
        F("end", "u64"),
    )),
    Record("crac_dev_record", 40, "device.img, after the header: one allocation", (
        F("addr", "u64"), F("size", "u64"),
        F("offset", "u64", "of its contents in device.img (page-aligned; zero pages are holes)"),
        F("kind", "u32", "enum crac_dev_kind"),
        F("crc32c", "u32", "over each saved page: 8-byte page index, then its bytes"),
        F("saved_pages", "u64"),
    )),
)  # fmt: skip
RECORD = {r.name: r for r in RECORDS}


# MANIFEST.json (written by loader/image/image_commit.c): (key path, JSON type, meaning). `a.b` is
# key b of object a, `a[]` an element of list a, `<path>` a file's path relative to the generation.
# The test harness checks every key of every manifest the tests make against this list.
MANIFEST_KEYS: tuple[tuple[str, str, str], ...] = (
    ("format", "string", '`"crac-image"`'),
    ("format_version", "integer", "CRAC_IMAGE_FORMAT (2)"),
    ("crac_version", "string", "the crac that wrote the image"),
    ("generation", "integer", "N of gen-N (also in the PROCESS note)"),
    ("created", "string", "UTC time, `YYYY-MM-DDTHH:MM:SSZ`"),
    ("host", "object", "where the checkpoint was taken"),
    ("host.hostname", "string", "gethostname"),
    ("host.hostid", "string", "gethostid, 8 hex digits (the `<hostid>` of the process directory)"),
    ("host.kernel", "string", "uname release"),
    ("host.glibc", "string", "the loader's glibc version"),
    ("process", "object", "the checkpointed program"),
    ("process.pid", "integer", "the kernel's pid at checkpoint time (the program's own pid, as "
     "it knows it, is the PROCESS note's `pid`)"),
    ("process.program", "string", "path of the program (bytes escaped as described above)"),
    ("process.program_sha256", "string", "SHA-256 of the program file, hex"),
    ("process.argv", "list of strings", "its arguments, argv[0] first"),
    ("process.threads", "integer", "threads at checkpoint (entries of the THREADS note)"),
    ("process.ckpt_signal", "integer", "the checkpoint signal"),
    ("process.coordinated", "boolean", "one process of a job (ran under a coordinator: `crac "
     "restart` of the directory restarts them all), or a run of its own"),
    ("process.forked", "boolean", "made by a fork in the job (or the exec or restart of such a "
     "process), not by `crac launch`: the restart script does not wait for one whose parent in "
     "the job is gone (a daemon). Absent (older images): false"),
    ("process.ckpt_open_files", "boolean", "--ckpt-open-files: every written file's copy kept "
     "in files/, whatever its size; a restart goes on with it. Absent (older images): false"),
    ("process.vpid", "integer", "its pid as the program knows it (process trees: "
     "crac_py/launch/tree.py)"),
    ("process.vppid", "integer", "its parent's pid as the program knows it (getppid)"),
    ("process.zombies", "list of objects", "children that had ended and were not waited for: a "
     "restart recreates each, ended the same way"),
    ("process.zombies[].vpid", "integer", "the child's pid as the program knows it"),
    ("process.zombies[].status", "integer", "the status its wait gets (as waitpid's)"),
    ("process.children", "list of integers", "its running children checkpointed with it in the "
     "job, by pid as the program knows them (`crac verify` refuses a tree image without one)"),
    ("process.pgid", "integer", "its process group as the program knows it (getpgrp; a restart "
     "makes the tree's groups again)"),
    ("process.sid", "integer", "its session as the program knows it (getsid; a session leader "
     "calls setsid again)"),
    ("process.ctty", "object or null", "a session leader's controlling terminal when it is one "
     "of its fds 0-2 (a pseudo-terminal of the tree is made its terminal again), else null. "
     "Absent (older images): null"),
    ("process.ctty.fd", "integer", "which of fds 0-2"),
    ("process.ctty.foreground", "integer", "the terminal's foreground process group as the "
     "program knows it (-1: none)"),
    ("backend", "object", "the device backend the process ran with"),
    ("backend.name", "string", 'e.g. `"sim"`; `"none"` without a device backend'),
    ("backend.version", "string", "the backend's version string"),
    ("backend.driver_version", "integer", "the driver version it reported"),
    ("loader_sha256", "string", "SHA-256 of the crac-loader that wrote the image"),
    ("device", "object", "device state (the index of device.img, counts of other objects)"),
    ("device.allocations", "list of objects", "device and managed allocations, as in device.img"),
    ("device.allocations[].address", "integer", "its device address (`addr` in device.img)"),
    ("device.allocations[].size", "integer", "bytes"),
    ("device.allocations[].kind", "string", '`"device"` or `"managed"`'),
    ("device.streams", "integer", "streams the program had created"),
    ("device.events", "integer", "events"),
    ("device.modules", "integer", "loaded modules"),
    ("device.pinned", "integer", "pinned (page-locked) host ranges"),
    ("not_saved", "list of strings", "what this checkpoint could not save (a child process, a "
     "socket), one sentence each; also said on stderr when first met"),
    ("upper_core", "object", "upper.core"),
    ("upper_core.size", "integer", "its size in bytes (sparse: most may be holes)"),
    ("upper_core.header_crc32c", "integer", "CRC-32C of all before the first region's data: ELF "
     "header, program headers, notes, zero padding to a page"),
    ("files", "object", "every file of the generation but MANIFEST.json, by relative path"),
    ("files.<path>", "object", "one file"),
    ("files.<path>.size", "integer", "bytes"),
    ("files.<path>.sha256", "string", "SHA-256 of its bytes (files not sparse; upper.core has "
     "the key below)"),
    ("files.<path>.sha256_pages", "string", "device.img and a sparse files/fd-N: its page digest"),
    ("files.<path>.crc32c_regions", "boolean", "upper.core: `true`, checked by "
     "upper_core.header_crc32c and the REGIONS note's CRC-32C of each region"),
    ("manifest_sha256", "string", "SHA-256 of this file with this value written as 64 zeros"),
    ("incremental", "object", "--incremental (docs/IMAGE.md \"Incremental generations\"; a "
     "restart goes on with it)"),
    ("incremental.full_every", "integer", "every how many generations one is full; 0: off, "
     "every generation full"),
    ("incremental.parent", "integer", "an incremental generation: its parent generation "
     "(the PARENT note); 0: a full one"),
    ("incremental.base", "integer", "the full generation its chain starts at (itself if full; "
     "0 when off)"),
    ("incremental.parent_header_crc32c", "integer", "the parent's upper_core.header_crc32c"),
)  # fmt: skip


def manifest_key_paths(manifest: object, prefix: str = "") -> set[str]:
    """The key paths (in MANIFEST_KEYS' notation) a parsed MANIFEST.json holds."""
    out: set[str] = set()
    if isinstance(manifest, dict):
        for key, value in manifest.items():
            name = "<path>" if prefix == "files" else key
            path = f"{prefix}.{name}" if prefix else name
            out.add(path)
            out |= manifest_key_paths(value, path)
    elif isinstance(manifest, list):
        for item in manifest:
            out |= manifest_key_paths(item, prefix + "[]")
    return out


def _comment(text: str, indent: str = "") -> str:
    return f"{indent}/* {text} */" if text else ""


def c_header() -> str:
    """The text of crac_image_gen.h."""
    out = [
        "/* crac_image_gen.h — GENERATED from crac_py/image/format.py by build_native.py: edit the",
        " * spec, not this file. The records of upper.core's CRAC notes and of device.img. */",
        "#ifndef CRAC_IMAGE_GEN_H",
        "#define CRAC_IMAGE_GEN_H",
        "",
        "#include <stddef.h>",
        "#include <stdint.h>",
        "",
    ]
    for name, value, doc in DEFINES:
        out.append(f"#define {name} {value} {_comment(doc)}".rstrip())
    for e in ENUMS:
        out += ["", _comment(e.doc), f"enum {e.name} {{"]
        for cname, value, _, doc in e.values:
            v = f"{value:#x}" if value > 255 else str(value)
            out.append(f"    {cname} = {v}, {_comment(doc)}".rstrip())
        out.append("};")
    for r in RECORDS:
        offsets = r.offsets
        out += ["", _comment(r.doc), f"struct {r.name} {{"]
        for f in r.fields:
            dims = "".join(f"[{d}]" for d in f.dims)
            out.append(f"    {CTYPES[f.ctype][0]} {f.name}{dims}; {_comment(f.doc)}".rstrip())
        out.append("};")
        out.append(f'_Static_assert(sizeof(struct {r.name}) == {r.size}, "{r.name} size");')
        for f in r.fields:
            out.append(
                f"_Static_assert(offsetof(struct {r.name}, {f.name}) == {offsets[f.name]}, "
                f'"{r.name}.{f.name}");'
            )
    out += ["", "#endif", ""]
    return "\n".join(out)


def markdown() -> str:
    """The record tables of docs/IMAGE.md (between its `format.py` markers)."""
    out = ["| note type | C name | descriptor holds |", "|---|---|---|"]
    for n in NOTES:
        opt = " (optional)" if n.optional else ""
        out.append(f"| `{n.type:#x}` | `{n.cname}`{opt} | {n.content} |")
    for e in ENUMS[1:]:
        out += ["", f"`enum {e.name}` ({e.doc}):", ""]
        out += [f"* `{v}` `{c}` ({label}){': ' + d if d else ''}" for c, v, label, d in e.values]
    for r in RECORDS:
        out += ["", f"**`struct {r.name}`** ({r.size} bytes): {r.doc}.", ""]
        out += ["| offset | field | type | meaning |", "|---|---|---|---|"]
        offsets = r.offsets
        for f in r.fields:
            dims = "".join(f"[{d}]" for d in f.dims)
            out.append(f"| {offsets[f.name]} | `{f.name}` | `{f.ctype}{dims}` | {f.doc} |")
    out += ["", "MANIFEST.json:", "", "| key | type | meaning |", "|---|---|---|"]
    out += [f"| `{k}` | {t} | {m} |" for k, t, m in MANIFEST_KEYS]
    return "\n".join(out) + "\n"


def write_c_header(out_dir: Path) -> Path:
    """Write crac_image_gen.h into OUT_DIR, leaving it untouched (and its mtime) when unchanged."""
    path = Path(out_dir) / "crac_image_gen.h"
    text = c_header()
    try:
        if path.read_text() == text:
            return path
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".h.tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return path


def main(argv: list[str]) -> int:
    if argv[1:] == ["--markdown"]:
        sys.stdout.write(markdown())
    elif argv[1:] == ["--c-header"]:
        sys.stdout.write(c_header())
    else:
        print("usage: python -m crac_py.image.format --markdown | --c-header", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
