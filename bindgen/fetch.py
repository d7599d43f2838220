"""HTTP for source downloads: whole streams and byte ranges, every byte counted, progress shown.

One ``Net`` serves one run. Once a request fails for a network reason (no route, refused, DNS,
timeout), the rest fail at once with that reason instead of waiting out their own timeouts.
"""

from __future__ import annotations

import io
import time
from typing import IO, Any, Callable

from .errors import SourceError

Log = Callable[[str], None]
_TIMEOUT_S = 30
_MB = 1e6


def mb(n: int | float) -> str:
    return f"{n / _MB:.1f} MB"


class Net:
    """Counts downloaded bytes and prints progress lines (bytes, rate) through ``log``."""

    def __init__(self, log: Log, timeout_s: float = _TIMEOUT_S) -> None:
        self.log, self.timeout_s = log, timeout_s
        self.downloaded = 0  # bytes received over HTTP in this run
        self.down: str | None = None  # why the network failed, once it has

    def _open(self, url: str, headers: dict[str, str], what: str) -> Any:  # an HTTP response
        if self.down:
            raise SourceError(f"{what}: not tried, the network failed earlier in this run "
                              f"({self.down})")
        # Imported here: http.client, email and ssl are imports that a warm cache never needs.
        import urllib.error
        import urllib.request

        req = urllib.request.Request(url, headers={"User-Agent": "bindgen", **headers})
        try:
            return urllib.request.urlopen(req, timeout=self.timeout_s)
        except urllib.error.HTTPError as e:
            raise SourceError(f"{what}: {url} answered HTTP {e.code} {e.reason}") from None
        except (urllib.error.URLError, OSError) as e:
            self.down = str(getattr(e, "reason", e))
            raise SourceError(f"{what}: cannot reach {url}: {self.down}") from None

    def get(self, url: str, what: str, headers: dict[str, str] | None = None) -> bytes:
        """A small document (an index page) in one piece."""
        with self._open(url, headers or {}, what) as r:
            data = r.read()
        self.downloaded += len(data)
        return data

    def stream(self, url: str, what: str, total: int = 0) -> "Counted":
        """A large download read front to back; progress is printed as it is consumed."""
        r = self._open(url, {}, what)
        length = total or int(r.headers.get("Content-Length") or 0)
        return Counted(r, self, what, length)

    def range(self, url: str, offset: int, n: int, what: str) -> bytes:
        """Bytes ``offset .. offset+n-1`` of ``url`` (the server must honour Range)."""
        if n <= 0:
            return b""
        with self._open(url, {"Range": f"bytes={offset}-{offset + n - 1}"}, what) as r:
            if r.status != 206:
                raise SourceError(f"{what}: {url} ignores HTTP Range requests")
            data = r.read()
        self.downloaded += len(data)
        if len(data) != n:
            raise SourceError(f"{what}: short range read from {url}")
        return data


class Counted(io.RawIOBase):
    """A response stream that counts what it delivers and logs progress about once a second."""

    def __init__(self, raw: IO[bytes], net: Net, what: str, total: int) -> None:
        self.raw, self.net, self.what, self.total = raw, net, what, total
        self.n = 0
        self.start = self._last = time.monotonic()

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        try:
            chunk = self.raw.read(len(b))
        except OSError as e:
            self.net.down = str(e)
            raise SourceError(f"{self.what}: download interrupted: {e}") from None
        b[: len(chunk)] = chunk
        self.n += len(chunk)
        self.net.downloaded += len(chunk)
        now = time.monotonic()
        if now - self._last >= 1.0:
            self._last = now
            self.net.log(self.line("downloading"))
        return len(chunk)

    def line(self, verb: str) -> str:
        s = max(time.monotonic() - self.start, 1e-6)
        of = f" of {mb(self.total)}" if self.total else ""
        return f"  {verb} {self.what}: {mb(self.n)}{of} in {s:.1f} s ({mb(self.n / s)}/s)"

    def close(self) -> None:
        self.raw.close()
        super().close()


class RangeFile(io.RawIOBase):
    """A seekable file over HTTP Range requests (for ``zipfile``: the central directory, then
    only the members asked for). Reads at least ``chunk`` bytes at a time and keeps the last."""

    def __init__(self, net: Net, url: str, size: int, what: str, chunk: int = 1 << 16) -> None:
        self.net, self.url, self.size, self.what, self.chunk = net, url, size, what, chunk
        self.pos = 0
        self._buf_at, self._buf = 0, b""

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = {0: offset, 1: self.pos + offset, 2: self.size + offset}[whence]
        return self.pos

    def tell(self) -> int:
        return self.pos

    def read_at(self, offset: int, n: int) -> bytes:
        n = max(0, min(n, self.size - offset))
        end = offset + n
        if not (self._buf_at <= offset and end <= self._buf_at + len(self._buf)):
            want = min(max(n, self.chunk), self.size - offset)
            self._buf_at, self._buf = offset, self.net.range(self.url, offset, want, self.what)
        lo = offset - self._buf_at
        return self._buf[lo : lo + n]

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read_at(self.pos, len(b))
        b[: len(data)] = data
        self.pos += len(data)
        return len(data)

