"""Which GPU code a CUDA shared object carries: the SASS and PTX targets of its fat binaries.

nvcc embeds device code as fat binaries in the ``.nv_fatbin`` section, one per translation
unit, each a header (magic ``0xBA55ED50``, version, header size, size of what follows) and
entries: kind (1 = PTX, 2 = ELF/SASS), header size, payload size, and the target
architecture as a number (80 = sm_80) with flags (``0x100000``: an arch-specific ``a``
target, ``0x200000``: a family ``f`` target). ``.nvFatBinSegment`` holds wrappers (magic
``0x466243B1``) whose data pointer addresses a fat binary; they are followed only when a file
has no ``.nv_fatbin`` section. Payloads (compressed or not) are skipped, never decoded; what
``cuobjdump --list-elf/--list-ptx`` lists is what is found here (tests/test_doctor_kernels.py
compares both on nvcc's output).

Whether those targets run on a GPU is :func:`cuda_resolve.compat.build_covers_gpu`'s rule,
the one the resolver and the wheelhouse use: SASS of the same major and no higher minor
(``a``/``f`` targets only on their own capability), or PTX at or below the GPU.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

from ._frozen import frozen
from .compat import build_covers_gpu
from .elf import ElfError, ElfImage, open_elf
from .index.cuda import ArchEntry
from .versions import ComputeCapability

__all__ = [
    "FATBIN_MAGIC",
    "WRAPPER_MAGIC",
    "FatbinError",
    "KernelGap",
    "KernelImages",
    "gpu_kernel",
    "kernel_gaps",
    "kernel_images",
    "read_kernel_images",
]

FATBIN_MAGIC = 0xBA55ED50
WRAPPER_MAGIC = 0x466243B1
_KIND_PTX, _KIND_ELF = 1, 2
_FLAG_ARCH_SPECIFIC = 0x100000
_FLAG_FAMILY = 0x200000
_HEADER = struct.Struct("<IHHQ")  # magic, version, header size, size of the entries
_ENTRY = struct.Struct("<HHIQ")  # kind, version, header size, payload size
_ENTRY_MIN = 48  # up to and including the flags word
#: libtorch_cuda.so carries ~2,000 fat binaries of ~10 entries each; these bounds are far
#: above any real file and stop a corrupt one from looping for long.
_MAX_FATBINS = 200_000
_MAX_ENTRIES = 2_000_000
_MAX_WHEEL_MEMBER = 8 * 1024**3


class FatbinError(ValueError):
    """A fat binary whose headers are corrupt or cut short; the message says where."""


KernelKind = Literal["sass", "ptx"]


@frozen(kw_only=False)
class KernelImages:
    """The distinct targets a file's fat binaries carry, sorted."""

    sass: tuple[ComputeCapability, ...]
    ptx: tuple[ComputeCapability, ...]
    entries: int  # code objects counted (cuobjdump lists each; duplicates across fat binaries)

    def names(self) -> tuple[str, ...]:
        """``('sm_80', 'sm_86', 'compute_86')``: nvcc's names, SASS then PTX."""
        return tuple(c.sm for c in self.sass) + tuple(_ptx_name(c) for c in self.ptx)

    def describe(self) -> str:
        """``sm_80, sm_86 and PTX compute_86`` / ``sm_80, sm_86 (no PTX)``."""
        sass = ", ".join(c.sm for c in self.sass) or "no SASS"
        ptx = ", ".join(_ptx_name(c) for c in self.ptx)
        return f"{sass} and PTX {ptx}" if ptx else f"{sass} (no PTX)"


def _ptx_name(capability: ComputeCapability) -> str:
    return f"compute_{capability.major}{capability.minor}{capability.suffix}"


def gpu_kernel(
    sass: Iterable[ComputeCapability], ptx: Iterable[ComputeCapability], gpu: ComputeCapability
) -> KernelKind | None:
    """How a GPU of capability ``gpu`` runs this code: ``"sass"`` (compiled for it, or for
    its major at a lower minor), ``"ptx"`` (JIT-compiled by the driver at first use) or None
    (``no kernel image is available for execution on the device``). The rule is
    compat.build_covers_gpu's; a PTX-only target is asked about as ``X.Y+PTX``, which that
    rule runs on exactly X.Y or, by PTX, on anything above."""
    if build_covers_gpu(tuple(ArchEntry(c) for c in sass), gpu):
        return "sass"
    if any(build_covers_gpu((ArchEntry(c, ptx=True),), gpu) for c in ptx):
        return "ptx"
    return None


# -- reading -----------------------------------------------------------------------------------


def _capability(number: int, flags: int, where: int) -> ComputeCapability:
    if not 10 <= number <= 9999:
        raise FatbinError(f"an entry at byte {where} names architecture {number}")
    suffix = "a" if flags & _FLAG_ARCH_SPECIFIC else "f" if flags & _FLAG_FAMILY else ""
    return ComputeCapability(number // 10, number % 10, suffix)


def _entries(
    data: bytes | mmap.mmap,
    start: int,
    end: int,
    found: list[tuple[int, ComputeCapability]],
    budget: list[int],
) -> int:
    """Read the fat binary at ``start`` (which must lie below ``end``); append each entry's
    (kind, capability) to ``found``; return where the fat binary ends."""
    if start + _HEADER.size > end:
        raise FatbinError(f"a fat binary header at byte {start} is cut short")
    magic, _version, header_size, size = _HEADER.unpack_from(data, start)
    if magic != FATBIN_MAGIC:
        raise FatbinError(f"no fat binary magic at byte {start} (found {magic:#x})")
    if header_size < _HEADER.size or start + header_size + size > end:
        raise FatbinError(
            f"the fat binary at byte {start} claims {size} bytes, past the end of its section"
        )
    position, stop = start + int(header_size), start + int(header_size) + int(size)
    while position < stop:
        if position + _ENTRY_MIN > stop:
            raise FatbinError(f"an entry header at byte {position} is cut short")
        kind, _entry_version, entry_header, payload = _ENTRY.unpack_from(data, position)
        if entry_header < _ENTRY_MIN or position + entry_header + payload > stop:
            raise FatbinError(
                f"the entry at byte {position} claims {entry_header}+{payload} bytes, past the "
                "end of its fat binary"
            )
        (number,) = struct.unpack_from("<I", data, position + 28)
        (flags,) = struct.unpack_from("<Q", data, position + 40)
        if kind in (_KIND_PTX, _KIND_ELF):
            found.append((kind, _capability(number, flags, position)))
        budget[0] -= 1
        if budget[0] < 0:
            raise FatbinError(f"more than {_MAX_ENTRIES} fat binary entries")
        position += entry_header + payload
    return stop


def _section_fatbins(
    image: ElfImage,
    offset: int,
    size: int,
    found: list[tuple[int, ComputeCapability]],
    budget: list[int],
) -> None:
    """Every fat binary in a ``.nv_fatbin`` section: they follow one another, each aligned
    (the gap between them is zero padding)."""
    data, end = image.data, offset + size
    position, count = offset, 0
    while position < end:
        if data[position : position + 4] != b"\x50\xed\x55\xba":
            following = data.find(b"\x50\xed\x55\xba", position, end)
            if following < 0:
                if any(
                    data[position:end]
                ):  # trailing alignment is zeros; anything else is not a fatbin
                    raise FatbinError(f"bytes {position}..{end} of .nv_fatbin are not a fat binary")
                return
            if any(data[position:following]):
                raise FatbinError(
                    f"bytes {position}..{following} of .nv_fatbin are not a fat binary"
                )
            position = following
        position = _entries(data, position, end, found, budget)
        count += 1
        if count > _MAX_FATBINS:
            raise FatbinError(f"more than {_MAX_FATBINS} fat binaries")


def _wrapper_fatbins(
    image: ElfImage, found: list[tuple[int, ComputeCapability]], budget: list[int]
) -> None:
    """Follow ``.nvFatBinSegment``'s wrappers (magic, version, data pointer, filename) to the
    fat binaries they point at, wherever those lie in the file."""
    segment = image.section(".nvFatBinSegment")
    if segment is None or segment.type == 8:
        return
    data = image.data
    for position in range(segment.offset, segment.offset + segment.size - 23, 24):
        magic, _version, address = struct.unpack_from("<IIQ", data, position)
        if magic != WRAPPER_MAGIC:
            continue
        target = image.file_offset(address)
        if target is None:
            raise FatbinError(
                f"the wrapper at byte {position} points at {address:#x}, outside the "
                "file's sections"
            )
        _entries(data, target, len(data), found, budget)


def kernel_images(image: ElfImage) -> KernelImages | None:
    """The device code of an ELF image; None when it has none (host code only)."""
    found: list[tuple[int, ComputeCapability]] = []
    budget = [_MAX_ENTRIES]
    section = image.section(".nv_fatbin")
    try:
        if section is not None and section.type != 8:
            _section_fatbins(image, section.offset, section.size, found, budget)
        else:
            _wrapper_fatbins(image, found, budget)
    except struct.error as exc:
        raise FatbinError(f"a fat binary header is cut short ({exc})") from None
    if not found and section is None and image.section(".nvFatBinSegment") is None:
        return None
    sass = tuple(sorted({c for kind, c in found if kind == _KIND_ELF}, key=_order))
    ptx = tuple(sorted({c for kind, c in found if kind == _KIND_PTX}, key=_order))
    return KernelImages(sass=sass, ptx=ptx, entries=len(found))


def _order(capability: ComputeCapability) -> tuple[int, int, str]:
    return capability.major, capability.minor, capability.suffix


def read_kernel_images(path: Path) -> KernelImages | None:
    """:func:`kernel_images` of the file at ``path``; None when it is not ELF or carries no
    device code. :class:`FatbinError` (or :class:`~cuda_resolve.elf.ElfError`) names what is
    corrupt; OSError when it cannot be read. The file is mapped, never loaded."""
    with open_elf(path) as image:
        return None if image is None else kernel_images(image)


# -- a wheel (or an unpacked one) against the GPUs here ---------------------------------------


@frozen(kw_only=False)
class KernelGap:
    """A GPU capability that a file of a wheel has no kernel for."""

    file: str  # the path inside the wheel (or below the folder)
    capability: ComputeCapability
    carries: KernelImages

    def describe(self) -> str:
        return (
            f"{self.file} carries {self.carries.describe()}: no kernel runs on compute capability "
            f"{self.capability}"
        )


def kernel_gaps(source: Path, capabilities: Sequence[ComputeCapability]) -> tuple[KernelGap, ...]:
    """Which GPU capabilities have no kernel in a wheel file (``.whl``) or a folder (an
    unpacked wheel, a build tree, an extension file itself): one :class:`KernelGap` per file
    that carries device code and capability it cannot run on (by :func:`gpu_kernel`). Files
    without device code ask nothing of the GPUs. PTX that the driver would JIT-compile counts
    as a kernel. Nothing is executed; :class:`FatbinError`, :class:`ElfError` or OSError say
    that a file could not be read (the message names it)."""
    wanted = sorted(set(capabilities), key=_order)
    gaps: list[KernelGap] = []
    for name, images in _source_kernel_images(source):
        for capability in wanted:
            if gpu_kernel(images.sass, images.ptx, capability) is None:
                gaps.append(KernelGap(file=name, capability=capability, carries=images))
    return tuple(gaps)


def _named(name: str, error: Exception) -> Exception:
    if isinstance(error, (FatbinError, ElfError)):
        return type(error)(f"{name}: {error}")
    return error


def _source_kernel_images(source: Path) -> list[tuple[str, KernelImages]]:
    found: list[tuple[str, KernelImages]] = []
    if source.is_file() and source.suffix == ".whl":
        import shutil  # only a wheel is unpacked (doctor's start-up imports none of these)
        import tempfile
        import zipfile

        with (
            zipfile.ZipFile(source) as wheel,
            tempfile.TemporaryDirectory(prefix="cuda-resolve-fatbin-") as scratch,
        ):
            for member in wheel.infolist():
                if member.is_dir() or not _is_shared_object(member.filename):
                    continue
                if member.file_size > _MAX_WHEEL_MEMBER:
                    raise FatbinError(
                        f"{source}: {member.filename} is {member.file_size} bytes (more than "
                        f"{_MAX_WHEEL_MEMBER})"
                    )
                copy = Path(scratch) / "member.so"
                with wheel.open(member) as data, copy.open("wb") as out:
                    shutil.copyfileobj(data, out)
                try:
                    images = read_kernel_images(copy)
                except (FatbinError, ElfError) as exc:
                    raise _named(f"{source}!{member.filename}", exc) from None
                if images is not None:
                    found.append((member.filename, images))
        return found
    files = (
        [source]
        if source.is_file()
        else sorted(
            Path(directory) / name
            for directory, _dirs, names in os.walk(source)
            for name in names
            if _is_shared_object(name)
        )
    )
    for path in files:
        try:
            images = read_kernel_images(path)
        except (FatbinError, ElfError) as exc:
            raise _named(str(path), exc) from None
        if images is not None:
            found.append((str(path.relative_to(source)) if path != source else path.name, images))
    return found


def _is_shared_object(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base.endswith(".so") or ".so." in base
