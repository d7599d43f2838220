"""ioctl requests and shared libraries of the bindings support runtime (part of ``bindgen_rt``,
loaded on first use)."""

# typing costs more to import than this whole module: its names are for checkers only
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Sequence

import ctypes
import os

_IOC_NAMES = {0: "_IO", 1: "_IOW", 2: "_IOR", 3: "_IOWR"}


class IoctlRequest(int):
    """An ioctl request number that can also perform the ioctl.

    ``int(REQ)`` is the request; ``REQ(fd, arg=None, **fields)`` builds ``arg_type(**fields)`` when
    no ``arg`` is given, calls ioctl(2) on ``fd`` (an int or anything with ``fileno()``) and returns
    the argument, filled in by the kernel. Failures raise ``OSError`` naming the ioctl and the
    errno. ``ioctl=`` substitutes the system call (a seam for mocks): ``ioctl(fd, request, buf) ->
    int``.
    """

    name: str
    arg_type: "Any"

    def __new__(cls, value: int, name: str, arg_type: "Any" = None) -> "IoctlRequest":
        self = super().__new__(cls, value)
        self.name, self.arg_type = name, arg_type
        return self

    def __repr__(self) -> str:
        return f"<ioctl {self.name} {int(self):#x}>"

    def __reduce__(self) -> "Any":
        return (int, (int(self),))

    @property
    def nr(self) -> int:
        return int(self) & 0xFF

    def __call__(
        self, fd: "Any", arg: "Any" = None, *, ioctl: "Callable | None" = None, **fields: "Any"
    ) -> "Any":
        if arg is None and self.arg_type is not None:
            arg = self.arg_type(**fields)
        elif fields:
            raise TypeError(f"{self.name}: pass either a struct or fields, not both")
        fileno = fd if isinstance(fd, int) else fd.fileno()
        if ioctl is None:
            import fcntl

            ioctl = fcntl.ioctl
        try:
            if arg is None:
                ioctl(fileno, int(self), 0)
            else:
                ioctl(fileno, int(self), arg)
        except OSError as e:
            raise OSError(
                e.errno, f"ioctl {self.name} ({int(self):#x}) failed: {os.strerror(e.errno or 0)}"
            ) from None
        return arg


class Library:
    """A shared library loaded on first use.

    The path comes from the environment variable ``env`` when set, else the first of ``candidates``
    that loads. A missing library is reported when a function is first called, naming what was
    tried.
    """

    def __init__(self, name: str, candidates: "Sequence[str]", env: str) -> None:
        self.name, self.candidates, self.env = name, tuple(candidates), env
        self._dll: Any = None

    def dll(self) -> "Any":
        if self._dll is None:
            tried = []
            paths = [os.environ[self.env]] if os.environ.get(self.env) else list(self.candidates)
            for path in paths:
                try:
                    self._dll = ctypes.CDLL(path)
                    break
                except OSError as e:
                    tried.append(f"{path}: {e}")
            else:
                raise OSError(
                    f"library {self.name} could not be loaded (tried: {'; '.join(tried)}); "
                    f"install it or set {self.env} to its path"
                )
        return self._dll

    def function(
        self, name: str, restype: "Any", argtypes: "Sequence[Any]", variadic: bool = False
    ) -> "Callable":
        """A callable that resolves ``name`` on first call (so importing needs no library)."""
        lib = self
        fn: list[Any] = []

        def call(*args: "Any") -> "Any":
            if not fn:
                f = getattr(lib.dll(), name)
                f.restype = restype
                if not variadic:
                    f.argtypes = list(argtypes)
                fn.append(f)
            return fn[0](*args)

        call.__name__ = call.__qualname__ = name
        return call

    def variable(self, name: str, ctype: "Any") -> "Any":
        """The library's global ``name`` as a ctypes object (resolved now: call this lazily)."""
        return ctype.in_dll(self.dll(), name)
