"""Read ELF shared objects: what they need and where they look, their sections, and their
dynamic symbols (undefined ones, and whether a library defines a name).

A pure parser over bytes (no ``ldd``: running the loader on an untrusted file executes code
paths we do not need, and ``ldd`` is slow over hundreds of files). Only 64-bit ELF is read;
anything else yields ``None``.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ._frozen import frozen

__all__ = [
    "DynamicInfo",
    "ElfError",
    "ElfImage",
    "Section",
    "open_elf",
    "parse_dynamic",
    "read_dynamic",
]

_PT_LOAD = 1
_PT_DYNAMIC = 2
_DT_NULL, _DT_NEEDED, _DT_STRTAB, _DT_RPATH, _DT_RUNPATH = 0, 1, 5, 15, 29


@frozen(kw_only=False)
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
        p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz = struct.unpack_from(
            endian + "IIQQQQ", data, base
        )
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
    rpath = tuple(
        p for tag, value in entries if tag == _DT_RPATH for p in string(value).split(":") if p
    )
    runpath = tuple(
        p for tag, value in entries if tag == _DT_RUNPATH for p in string(value).split(":") if p
    )
    return DynamicInfo(needed, rpath, runpath)


def _file_offset(vaddr: int, loads: list[tuple[int, int, int]]) -> int | None:
    for seg_vaddr, seg_offset, seg_size in loads:
        if seg_vaddr <= vaddr < seg_vaddr + seg_size:
            return vaddr - seg_vaddr + seg_offset
    return None


# -- sections and the dynamic symbol table ---------------------------------------------------

_SHT_HASH, _SHT_DYNSYM, _SHT_GNU_HASH = 5, 11, 0x6FFFFFF6
_SHN_UNDEF = 0
_STB_GLOBAL, _STB_WEAK = 1, 2
_SYMBOL_SIZE = 24  # Elf64_Sym
#: Bounds on what one file may ask us to read: libtorch_cpu.so has ~200k dynamic symbols and
#: 40-odd sections; a mangled C++ name runs to a few KB.
_MAX_SECTIONS = 4096
_MAX_SYMBOLS = 4_000_000
_MAX_NAME = 64 * 1024
_MAX_BUCKETS = 1 << 24


class ElfError(ValueError):
    """A file that claims to be ELF but whose headers or tables point outside it (truncated,
    corrupt); the message says what was out of bounds."""


@frozen(kw_only=False)
class Section:
    name: str
    type: int
    address: int
    offset: int
    size: int
    link: int


class ElfImage:
    """A 64-bit ELF file's section table over its bytes (usually a read-only map).

    Every offset read from the file is checked against the file's size before use: a
    truncated or corrupt file raises :class:`ElfError`, never reads past the end, and never
    makes a table larger than the bounds above. Nothing is executed or relocated.
    """

    def __init__(self, data: bytes | mmap.mmap) -> None:
        self.data = data
        if len(data) < 64 or data[:4] != b"\x7fELF":
            raise ElfError("not an ELF file")
        if data[4] != 2:
            raise ElfError("not a 64-bit ELF file")
        self.endian = "<" if data[5] == 1 else ">"
        (shoff,) = struct.unpack_from(self.endian + "Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from(self.endian + "HHH", data, 0x3A)
        self.sections: tuple[Section, ...] = ()
        if shoff == 0 or shnum == 0:
            return  # no section table (sstrip'ed): nothing to read by section
        if shentsize < 64 or shnum > _MAX_SECTIONS:
            raise ElfError(f"section table of {shnum} entries of {shentsize} bytes")
        self._check(shoff, shentsize * shnum, "the section table")
        raw = [
            struct.unpack_from(self.endian + "IIQQQQII", data, shoff + number * shentsize)
            for number in range(shnum)
        ]
        names_offset = names_size = 0
        if shstrndx < shnum:
            names_offset, names_size = raw[shstrndx][4], raw[shstrndx][5]
            self._check(names_offset, names_size, "the section name table")
        sections = []
        for name_at, kind, _flags, address, offset, size, link, _info in raw:
            name = self._string(names_offset, names_size, name_at) if names_size else ""
            sections.append(
                Section(name=name, type=kind, address=address, offset=offset, size=size, link=link)
            )
        self.sections = tuple(sections)

    def _check(self, offset: int, size: int, what: str) -> None:
        if offset < 0 or size < 0 or offset + size > len(self.data):
            raise ElfError(
                f"{what} (bytes {offset}..{offset + size}) runs past the end of the file "
                f"({len(self.data)} bytes)"
            )

    def _string(self, table: int, table_size: int, at: int) -> str:
        if at >= table_size:
            raise ElfError(f"a name at {at} lies outside its string table ({table_size} bytes)")
        start = table + at
        end = self.data.find(b"\x00", start, min(table + table_size, start + _MAX_NAME))
        if end < 0:
            raise ElfError(f"the name at {start} has no end within its string table")
        try:
            return self.data[start:end].decode("utf-8")
        except UnicodeDecodeError:
            raise ElfError(f"the name at {start} is not UTF-8") from None

    def section(self, name: str) -> Section | None:
        """The first section called ``name`` (``.nv_fatbin``), checked to lie inside the file
        unless it occupies no file space (SHT_NOBITS)."""
        for section in self.sections:
            if section.name == name:
                if section.type != 8:  # SHT_NOBITS: .bss-like, no bytes in the file
                    self._check(section.offset, section.size, f"section {name}")
                return section
        return None

    def file_offset(self, address: int) -> int | None:
        """Where the byte loaded at virtual ``address`` lies in the file (by section)."""
        for section in self.sections:
            if (
                section.type != 8
                and section.address
                and section.address <= address < section.address + section.size
            ):
                return address - section.address + section.offset
        return None

    # -- dynamic symbols -------------------------------------------------------------------

    def _dynsym(self) -> tuple[Section, Section] | None:
        dynsym = next((s for s in self.sections if s.type == _SHT_DYNSYM), None)
        if dynsym is None:
            return None
        if dynsym.link >= len(self.sections):
            raise ElfError(f".dynsym links to section {dynsym.link}, which does not exist")
        strtab = self.sections[dynsym.link]
        self._check(dynsym.offset, dynsym.size, "the dynamic symbol table")
        self._check(strtab.offset, strtab.size, "the dynamic string table")
        if dynsym.size // _SYMBOL_SIZE > _MAX_SYMBOLS:
            raise ElfError(
                f"{dynsym.size // _SYMBOL_SIZE} dynamic symbols (more than {_MAX_SYMBOLS})"
            )
        return dynsym, strtab

    def undefined_symbols(self) -> tuple[str, ...]:
        """Names of the strong (global, not weak) undefined dynamic symbols: what the loader
        must find in another library or fail with ``undefined symbol: NAME``."""
        tables = self._dynsym()
        if tables is None:
            return ()
        dynsym, strtab = tables
        names: list[str] = []
        end = dynsym.offset + dynsym.size - dynsym.size % _SYMBOL_SIZE
        fmt = self.endian + "IBBHQQ"
        for name_at, info, _other, shndx, _value, _size in struct.iter_unpack(
            fmt, self.data[dynsym.offset : end]
        ):
            if shndx == _SHN_UNDEF and name_at and info >> 4 == _STB_GLOBAL:
                names.append(self._string(strtab.offset, strtab.size, name_at))
        return tuple(names)

    def defined_symbols(self, names: Iterable[str]) -> frozenset[str]:
        """Which of ``names`` this file's dynamic symbol table defines (global or weak).

        Looked up through the GNU hash table as the loader does, so asking about a few hundred
        names in libtorch_cpu.so (~200k symbols) touches a few hundred entries; without one,
        the whole table is read once."""
        wanted = set(names)
        tables = self._dynsym()
        if tables is None or not wanted:
            return frozenset()
        dynsym, strtab = tables
        count = dynsym.size // _SYMBOL_SIZE
        gnu_hash = next((s for s in self.sections if s.type == _SHT_GNU_HASH), None)
        if gnu_hash is not None:
            return frozenset(
                name for name in wanted if self._gnu_lookup(gnu_hash, dynsym, strtab, count, name)
            )
        found: set[str] = set()
        fmt = self.endian + "IBBHQQ"
        end = dynsym.offset + count * _SYMBOL_SIZE
        for name_at, info, _other, shndx, _value, _size in struct.iter_unpack(
            fmt, self.data[dynsym.offset : end]
        ):
            if shndx != _SHN_UNDEF and name_at and info >> 4 in (_STB_GLOBAL, _STB_WEAK):
                name = self._string(strtab.offset, strtab.size, name_at)
                if name in wanted:
                    found.add(name)
        return frozenset(found)

    def _gnu_lookup(
        self, table: Section, dynsym: Section, strtab: Section, count: int, name: str
    ) -> bool:
        self._check(table.offset, table.size, "the GNU hash table")
        data, endian, base = self.data, self.endian, table.offset
        nbuckets, symoffset, bloom_size, bloom_shift = struct.unpack_from(
            endian + "IIII", data, base
        )
        if nbuckets == 0 or nbuckets > _MAX_BUCKETS or bloom_size > _MAX_BUCKETS:
            raise ElfError(f"GNU hash table with {nbuckets} buckets and {bloom_size} bloom words")
        bloom_at = base + 16
        buckets_at = bloom_at + 8 * bloom_size
        chains_at = buckets_at + 4 * nbuckets
        if chains_at > base + table.size:
            raise ElfError("the GNU hash table is shorter than its header says")
        encoded = name.encode("utf-8")
        digest = 5381
        for byte in encoded:
            digest = (digest * 33 + byte) & 0xFFFFFFFF
        if bloom_size:
            (word,) = struct.unpack_from(
                endian + "Q", data, bloom_at + 8 * ((digest // 64) % bloom_size)
            )
            mask = (1 << (digest % 64)) | (1 << ((digest >> bloom_shift) % 64))
            if word & mask != mask:
                return False
        (index,) = struct.unpack_from(endian + "I", data, buckets_at + 4 * (digest % nbuckets))
        if index == 0:
            return False
        while symoffset <= index < count:
            chain_at = chains_at + 4 * (index - symoffset)
            if chain_at + 4 > base + table.size:
                raise ElfError("a GNU hash chain runs past its table")
            (chained,) = struct.unpack_from(endian + "I", data, chain_at)
            if chained | 1 == digest | 1:
                name_at, info, _other, shndx = struct.unpack_from(
                    endian + "IBBH", data, dynsym.offset + index * _SYMBOL_SIZE
                )
                if (
                    shndx != _SHN_UNDEF
                    and info >> 4 in (_STB_GLOBAL, _STB_WEAK)
                    and self._string(strtab.offset, strtab.size, name_at) == name
                ):
                    return True
            if chained & 1:
                return False
            index += 1
        return False


@contextmanager
def open_elf(path: Path, *, limit: int = 16 * 1024**3) -> Iterator[ElfImage | None]:
    """Map ``path`` read-only as an :class:`ElfImage`; ``None`` when it is not an ELF file (or
    not a regular file, or larger than ``limit``). :class:`ElfError` when it starts like one
    but its headers are cut short or corrupt; OSError when it cannot be read."""
    if not path.is_file():  # a FIFO named like a library would block the open
        yield None
        return
    with path.open("rb") as handle:
        if handle.read(4) != b"\x7fELF" or os.fstat(handle.fileno()).st_size > limit:
            yield None
            return
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            try:
                image = ElfImage(data)
            except struct.error as exc:
                raise ElfError(f"headers cut short ({exc})") from None
            yield image
