"""Reading archives without trusting them: tar (streamed), zip, Debian's ar, and indexed xz.

Extraction never writes outside its target folder: absolute and ``..`` member names are refused,
links are followed only when they stay inside, and no file is written through a link. This is our
own code because Debian 12's Python 3.11.2 predates ``tarfile`` extraction filters.
"""

from __future__ import annotations

import fnmatch
import hashlib
import io
import lzma
import os
import struct
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Iterator

from .errors import SourceError
from .pins import Member


class UnsafeMember(SourceError):
    """An archive member would land outside the folder it is unpacked into."""


def member_path(name: str, strip: int, archive: str) -> str:
    """``name`` as a relative path below the unpack folder, ``strip`` leading parts dropped.

    Returns "" for a member that lies entirely within the stripped parts. Refuses absolute names,
    ``..`` parts and backslashes, whatever ``strip`` would leave."""
    if name.startswith("/") or "\\" in name or "\0" in name:
        raise UnsafeMember(f"{archive}: member {name!r} has an absolute or non-POSIX name; refused")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafeMember(f"{archive}: member {name!r} climbs out with '..'; refused")
    return "/".join(parts[strip:])


def selected(rel: str, members: tuple[str, ...]) -> bool:
    return bool(rel) and (not members or any(fnmatch.fnmatchcase(rel, g) for g in members))


class Extractor:
    """Writes members below ``out``; every path is checked against ``out`` after resolving."""

    def __init__(self, out: Path, archive: str) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.out, self.archive = out, archive
        self.root = os.path.realpath(out)
        self.members: dict[str, Member] = {}
        self._links: list[tuple[str, str]] = []

    def _inside(self, p: str) -> bool:
        return p == self.root or p.startswith(self.root + os.sep)

    def _dest(self, rel: str) -> Path:
        dest = self.out / rel
        # A parent may be a link made from this archive: the real location must stay inside.
        if not self._inside(os.path.realpath(dest.parent)) or dest.is_symlink():
            raise UnsafeMember(f"{self.archive}: member {rel!r} would be written through a link")
        return dest

    def write(self, rel: str, data: IO[bytes], offset: int = -1) -> Member:
        dest = self._dest(rel)
        dest.parent.mkdir(parents=True, exist_ok=True)
        h, n = hashlib.sha256(), 0
        with dest.open("wb") as f:
            for chunk in iter(lambda: data.read(1 << 20), b""):
                h.update(chunk)
                f.write(chunk)
                n += len(chunk)
        m = Member(rel, h.hexdigest(), n, offset)
        self.members[rel] = m
        return m

    def link(self, rel: str, target: str, hard: bool, strip: int) -> None:
        """Records a link; made in ``finish`` once every file is in place (if it stays inside)."""
        if hard:  # a hard link names another member of the archive
            to = member_path(target, strip, self.archive)
        else:
            if target.startswith("/"):
                raise UnsafeMember(
                    f"{self.archive}: link {rel!r} points to the absolute path {target!r}; refused"
                )
            to = os.path.normpath(os.path.join(os.path.dirname(rel), target))
        if to.startswith("..") or os.path.isabs(to):
            raise UnsafeMember(f"{self.archive}: link {rel!r} -> {target!r} points outside; refused")
        self._links.append((rel, to))

    def finish(self) -> dict[str, Member]:
        """Makes recorded links as copies of what they name (files stay plain files in the
        cache, so its hashes cover everything a header search can reach)."""
        for _ in range(len(self._links) + 1):
            pending = []
            for rel, to in self._links:
                if to in self.members:
                    with (self.out / to).open("rb") as f:
                        self.write(rel, f)
                else:
                    pending.append((rel, to))
            if len(pending) == len(self._links):
                break
            self._links = pending
        return self.members


def extract_tar_stream(
    fileobj: IO[bytes],
    out: Path,
    members: tuple[str, ...],
    strip: int,
    archive: str,
    on_member: Callable[[tarfile.TarInfo, str], bool] | None = None,
) -> dict[str, Member]:
    """Unpacks the selected regular files of a tar stream read front to back.

    ``on_member(info, rel)`` sees every member first; returning True stops reading (the caller
    has all it needs). Members' offsets are their data offsets in the decompressed stream."""
    ex = Extractor(out, archive)
    try:
        with tarfile.open(fileobj=fileobj, mode="r|*") as tf:
            for m in tf:
                rel = member_path(m.name, strip, archive)
                if on_member and on_member(m, rel):
                    break
                if not selected(rel, members) or m.isdir():
                    continue
                if m.issym() or m.islnk():
                    ex.link(rel, m.linkname, m.islnk(), strip)
                elif m.isfile():
                    src = tf.extractfile(m)
                    assert src is not None
                    ex.write(rel, src, m.offset_data)
                # devices, fifos: never headers; ignored
    except (tarfile.TarError, EOFError, lzma.LZMAError, OSError) as e:
        if isinstance(e, SourceError):
            raise
        raise SourceError(f"{archive}: cannot read the tar stream: {e}") from None
    return ex.finish()


def extract_zip(
    zf: zipfile.ZipFile, out: Path, members: tuple[str, ...], archive: str
) -> dict[str, Member]:
    """Unpacks the selected files of a zip (a wheel), refusing unsafe names."""
    ex = Extractor(out, archive)
    for info in zf.infolist():
        rel = member_path(info.filename, 0, archive)
        if info.is_dir() or not selected(rel, members):
            continue
        if (info.external_attr >> 16) & 0o170000 == 0o120000:
            raise UnsafeMember(f"{archive}: member {rel!r} is a symbolic link; refused")
        with zf.open(info) as src:
            ex.write(rel, src)
    return ex.finish()


# ---------------------------------------------------------------- Debian's ar container


@dataclass(frozen=True)
class ArMember:
    name: str
    offset: int  # of the data
    size: int


def ar_members(read: Callable[[int, int], bytes], total: int, archive: str) -> Iterator[ArMember]:
    """The members of an ``ar`` archive (a .deb), read through ``read(offset, n)``."""
    if read(0, 8) != b"!<arch>\n":
        raise SourceError(f"{archive}: not a Debian package (no ar signature)")
    pos = 8
    while pos + 60 <= total:
        h = read(pos, 60)
        if h[58:60] != b"`\n":
            raise SourceError(f"{archive}: damaged ar header at byte {pos}")
        name = h[:16].decode("ascii", "replace").strip().rstrip("/")
        try:
            size = int(h[48:58].decode("ascii").strip())
        except ValueError:
            raise SourceError(f"{archive}: damaged ar header at byte {pos}") from None
        yield ArMember(name, pos + 60, size)
        pos += 60 + size + (size & 1)


class ArStream(io.RawIOBase):
    """Reads one ar member's data from a forward-only stream (the download as it arrives)."""

    def __init__(self, raw: IO[bytes], want_prefix: str, archive: str) -> None:
        self.raw, self.archive = raw, archive
        if self._exact(8) != b"!<arch>\n":
            raise SourceError(f"{archive}: not a Debian package (no ar signature)")
        while True:
            h = self._exact(60)
            name = h[:16].decode("ascii", "replace").strip().rstrip("/")
            size = int(h[48:58].decode("ascii").strip())
            if name.startswith(want_prefix):
                self.name, self.left = name, size
                return
            self._exact(size + (size & 1))

    def _exact(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.raw.read(n - len(out))
            if not chunk:
                raise SourceError(f"{self.archive}: truncated")
            out += chunk
        return out

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        if self.left <= 0:
            return 0
        chunk = self.raw.read(min(len(b), self.left))
        if not chunk:
            raise SourceError(f"{self.archive}: truncated")
        b[: len(chunk)] = chunk
        self.left -= len(chunk)
        return len(chunk)


def decompressor_stream(raw: IO[bytes], name: str) -> IO[bytes]:
    """A forward stream of ``name``'s decompressed bytes (a .deb's data.tar.*)."""
    if name.endswith(".xz"):
        return lzma.LZMAFile(raw)  # type: ignore[return-value]
    if name.endswith(".gz"):
        import gzip

        return gzip.GzipFile(fileobj=raw)  # type: ignore[return-value]
    if name.endswith(".tar"):
        return raw
    raise SourceError(f"{name}: compression not supported (xz, gz or none)")


# ---------------------------------------------------------------- indexed xz (random access)


@dataclass(frozen=True)
class XzBlock:
    coffset: int  # of the block header, from the start of the .xz
    csize: int  # header + data + padding + check
    uoffset: int
    usize: int


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    v, shift = 0, 0
    while True:
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return v, pos
        shift += 7
        if shift > 63:
            raise SourceError("xz index: varint too long")


_CHECK_SIZE = {0: 0, 1: 4, 4: 8, 10: 32}


def xz_blocks(read: Callable[[int, int], bytes], size: int, archive: str) -> tuple[bytes, list[XzBlock]]:
    """Parses a single-stream .xz's index: (stream header, blocks). Multi-block files (``xz -T``,
    as dpkg-deb and the kernel's tarball write them) can then be read block by block."""
    header = read(0, 12)
    footer = read(size - 12, 12)
    if header[:6] != b"\xfd7zXZ\0" or footer[10:12] != b"YZ" or header[6:8] != footer[8:10]:
        raise SourceError(f"{archive}: not a single-stream .xz file")
    check = header[7] & 0x0F
    backward = (struct.unpack("<I", footer[4:8])[0] + 1) * 4
    index = read(size - 12 - backward, backward)
    if index[0] != 0:
        raise SourceError(f"{archive}: xz index not where the footer says")
    count, pos = _varint(index, 1)
    blocks, coff, uoff = [], 12, 0
    for _ in range(count):
        unpadded, pos = _varint(index, pos)
        usize, pos = _varint(index, pos)
        csize = (unpadded + 3) & ~3
        blocks.append(XzBlock(coff, csize, uoff, usize))
        coff, uoff = coff + csize, uoff + usize
    if coff != size - 12 - backward:
        raise SourceError(f"{archive}: xz index does not cover the file (more than one stream?)")
    if _CHECK_SIZE.get(check) is None:
        raise SourceError(f"{archive}: unknown xz check type {check}")
    return header, blocks


class XzView:
    """Random reads of an indexed .xz's decompressed bytes, decoding only the blocks touched."""

    def __init__(self, read: Callable[[int, int], bytes], size: int, archive: str) -> None:
        self._read, self.archive = read, archive
        self.header, self.blocks = xz_blocks(read, size, archive)
        self.size = self.blocks[-1].uoffset + self.blocks[-1].usize if self.blocks else 0
        self._cache: dict[int, bytes] = {}

    def _block(self, i: int) -> bytes:
        if i not in self._cache:
            b = self.blocks[i]
            d = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
            try:
                data = d.decompress(self.header + self._read(b.coffset, b.csize))
            except lzma.LZMAError as e:
                raise SourceError(f"{self.archive}: xz block {i} is damaged: {e}") from None
            if len(data) != b.usize:
                raise SourceError(f"{self.archive}: xz block {i} decodes to the wrong size")
            if len(self._cache) >= 2:  # blocks are up to tens of MB: keep the last two only
                self._cache.pop(next(iter(self._cache)))
            self._cache[i] = data
        return self._cache[i]

    def blocks_for(self, offset: int, n: int) -> list[int]:
        return [
            i
            for i, b in enumerate(self.blocks)
            if b.uoffset < offset + n and offset < b.uoffset + b.usize
        ] if n else []

    def read(self, offset: int, n: int) -> bytes:
        if offset < 0 or offset + n > self.size:
            raise SourceError(f"{self.archive}: read past the end of the decompressed data")
        out = bytearray()
        for i in self.blocks_for(offset, n):
            b = self.blocks[i]
            data = self._block(i)
            lo = max(offset, b.uoffset) - b.uoffset
            hi = min(offset + n, b.uoffset + b.usize) - b.uoffset
            out += data[lo:hi]
        return bytes(out)
