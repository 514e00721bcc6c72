"""Whether a test may mount a tmpfs in a private mount namespace (gone when its process exits)."""

from __future__ import annotations

import shutil
import subprocess


def private_mount_unavailable_reason() -> str | None:
    """None if this process may mount a tmpfs in a private mount namespace, else why not."""
    if shutil.which("unshare") is None:
        return "unshare(1) is not installed"
    probe = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "mount", "-t", "tmpfs", "t", "/mnt"],
        capture_output=True,
        text=True,
        timeout=10,
    )
    if probe.returncode != 0:
        return f"cannot mount in a private mount namespace: {probe.stderr.strip()}"
    return None
