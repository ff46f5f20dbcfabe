"""Where this user's caches live (the door's built module, traced functions), and the rule
for using one: ``$CASADI_DELASSUS_CACHE/<kind>``, default ``$XDG_CACHE_HOME`` or
``~/.cache``, ``casadi_delassus/<kind>``, used only when it is this user's and no one else
can write it (someone could plant a module or a trace there)."""
from __future__ import annotations

import os
import stat
from pathlib import Path


def cache_dir(kind):
    """The cache folder of ``kind`` ("door", "traces"), not created."""
    base = os.environ.get("CASADI_DELASSUS_CACHE")
    if base:
        return Path(base) / kind
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "casadi_delassus" / kind


def private_folder(folder):
    """``folder`` created if needed, when it is this user's and no one else can write it."""
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = folder.stat()
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
