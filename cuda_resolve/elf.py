"""Read the dynamic section of an ELF shared object: what it needs and where it looks.

A pure parser over bytes (no ``ldd``: running the loader on an untrusted file executes code
paths we do not need, and ``ldd`` is slow over hundreds of files). Only 64-bit ELF is read;
anything else yields ``None``.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DynamicInfo", "parse_dynamic", "read_dynamic"]

_PT_LOAD = 1
_PT_DYNAMIC = 2
_DT_NULL, _DT_NEEDED, _DT_STRTAB, _DT_RPATH, _DT_RUNPATH = 0, 1, 5, 15, 29


@dataclass(frozen=True, slots=True)
class DynamicInfo:
    needed: tuple[str, ...]
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]


def read_dynamic(path: Path, *, limit: int = 16 * 1024**3) -> DynamicInfo | None:
    """Parse ``path``; ``None`` when it is not a readable 64-bit ELF file.

    The file is mapped, not read: only the pages holding the headers, the dynamic section and
    the string table are touched, so a 1 GB CUDA extension costs what a small one does.
    """
    try:
        if not path.is_file():  # a FIFO named like a library would block the open
            return None
        with path.open("rb") as handle:
            if handle.read(4) != b"\x7fELF":
                return None
            size = os.fstat(handle.fileno()).st_size
            if size > limit:
                return None
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return parse_dynamic(data)
    except (OSError, ValueError):  # unreadable, or mmap of something that is not a file
        return None


def parse_dynamic(data: bytes | mmap.mmap) -> DynamicInfo | None:
    try:
        return _parse(data)
    except (struct.error, IndexError, ValueError):  # truncated or corrupt; ValueError covers
        return None  # a string offset past the end (bytes.index) and UnicodeDecodeError


def _parse(data: bytes | mmap.mmap) -> DynamicInfo | None:
    if data[:4] != b"\x7fELF" or data[4] != 2:  # ELFCLASS64 only
        return None
    endian = "<" if data[5] == 1 else ">"
    (phoff,) = struct.unpack_from(endian + "Q", data, 0x20)
    phentsize, phnum = struct.unpack_from(endian + "HH", data, 0x36)
    loads: list[tuple[int, int, int]] = []  # (vaddr, offset, filesz)
    dynamic: tuple[int, int] | None = None
    for number in range(phnum):
        base = phoff + number * phentsize
        p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz = struct.unpack_from(endian + "IIQQQQ", data, base)
        if p_type == _PT_LOAD:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == _PT_DYNAMIC:
            dynamic = (p_offset, p_filesz)
    if dynamic is None:
        return DynamicInfo((), (), ())
    entries: list[tuple[int, int]] = []
    offset, size = dynamic
    for position in range(offset, offset + size, 16):
        tag, value = struct.unpack_from(endian + "qQ", data, position)
        if tag == _DT_NULL:
            break
        entries.append((tag, value))
    strtab_vaddr = next((value for tag, value in entries if tag == _DT_STRTAB), None)
    if strtab_vaddr is None:
        return DynamicInfo((), (), ())
    strtab = _file_offset(strtab_vaddr, loads)
    if strtab is None:
        return None

    def string(at: int) -> str:
        start = strtab + at
        end = data.find(b"\x00", start)
        if start >= len(data) or end < 0:
            raise ValueError(f"string at {start} runs past the end of the file")
        return data[start:end].decode("utf-8")

    needed = tuple(string(value) for tag, value in entries if tag == _DT_NEEDED)
    rpath = tuple(p for tag, value in entries if tag == _DT_RPATH for p in string(value).split(":") if p)
    runpath = tuple(p for tag, value in entries if tag == _DT_RUNPATH for p in string(value).split(":") if p)
    return DynamicInfo(needed, rpath, runpath)


def _file_offset(vaddr: int, loads: list[tuple[int, int, int]]) -> int | None:
    for seg_vaddr, seg_offset, seg_size in loads:
        if seg_vaddr <= vaddr < seg_vaddr + seg_size:
            return vaddr - seg_vaddr + seg_offset
    return None
