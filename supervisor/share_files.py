"""Small JSON files in the share: replaced atomically (temp file, then rename), read warily.

The share is untrusted input: reads are bounded, never follow a symlink, never
block on a FIFO, and refuse nesting deeper than a record of ours can have.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from primacy.locker.share_io import create_new_file, fsync_directory, replace_within
from primacy.locker.untrusted import read_small_file

# A JSON file of ours is a flat record of a few hundred bytes.
MAX_JSON_BYTES = 64 * 1024
# How far ahead of this host's clock another host's timestamp may be and still count.
MAX_CLOCK_SKEW_S = 60.0


def write_json_atomically(
    path: Path, content: dict[str, Any], *, durable: bool, share_root: bool = False
) -> None:
    """Replace ``path`` with ``content``; readers see the old or the new file, never a part.

    The temp name is per process and thread, since two threads may write the same
    file. ``durable`` also fsyncs the file and the directory, for state that must
    survive a crash (not for entries rewritten every second anyway). ``share_root``:
    ``path`` is directly in the share, whose directory may be reached by a symlink.
    """
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    # A predictable name: whatever is planted there goes.
    fd = create_new_file(temporary, share_root=share_root)
    with open(fd, "w") as handle:
        handle.write(json.dumps(content, sort_keys=True) + "\n")
        if durable:
            handle.flush()
            os.fsync(handle.fileno())
    replace_within(temporary, path, share_root)
    if durable:
        fsync_directory(path.parent, share_root)


def read_json(path: Path, share_root: bool = False) -> dict[str, Any]:
    """A JSON object from the share; OSError or ValueError for anything else or anything odd."""
    try:
        value = json.loads(read_small_file(path, MAX_JSON_BYTES, share_root).decode())
    except RecursionError as exc:  # "[[[[..." passes the size bound
        raise ValueError(f"{path} nests too deeply") from exc
    if not isinstance(value, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    return value
