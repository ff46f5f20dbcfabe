"""The C compiler command, for the door (runtime/door.py builds door.c with it) and for the
generated code (codegen/build.py)."""
from __future__ import annotations

import os
import shlex
import shutil

from ..errors import CompilerError


def find_compiler(cc=None):
    """The C compiler command: ``cc``, else $CC, else the first of gcc, cc, clang on PATH.  A
    command with arguments (CC="ccache gcc") is split as a shell would; the result is a
    command line (str) with the program resolved on PATH."""
    spec = cc or os.environ.get("CC")
    if spec:
        try:
            words = shlex.split(spec)
        except ValueError as exc:
            raise CompilerError(f"cannot parse the C compiler command {spec!r} (from CC or --cc): {exc}") from None
        path = shutil.which(words[0]) if words else None
        if not path:
            raise CompilerError(f"C compiler {words[0] if words else spec!r} (from CC or --cc) not found on PATH")
        return shlex.join([path, *words[1:]])
    for name in ("gcc", "cc", "clang"):
        if shutil.which(name):
            return shutil.which(name)
    raise CompilerError("no C compiler found (looked for gcc, cc, clang): install gcc or set CC")
