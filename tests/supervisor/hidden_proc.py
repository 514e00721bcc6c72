"""Processes that ``/proc`` hides from one another, as the shipped unit's ``ProtectProc=invisible``
hides another user's: for the takeover shortcut's tests (docs/safety.md).

``as_another_user`` runs a process as ``nobody`` that keeps the right to read and write
any file (``CAP_DAC_OVERRIDE`` and ``CAP_DAC_READ_SEARCH``, as ambient capabilities), so
it still runs this virtualenv's Python under /root and writes a share root made.
``behind_hidden_proc`` gives a root process a ``/proc`` of its own, in a private mount
namespace (gone with the process), mounted ``hidepid=2`` with ``gid=`` a group it is not
in (the default, 0, would exempt root's group), and drops ``CAP_SYS_PTRACE`` from its
bounding set (which exempts its holder too; after exec, root's capabilities are its
bounding set). It then cannot see another user's processes in ``/proc``.

Both are ``preexec_fn``s: they run between fork and exec, so they only make system calls
through functions resolved beforehand.
"""

from __future__ import annotations

import ctypes
import os

NOBODY = 65534
_EXEMPT_GID = 65533  # the hidden /proc's gid=: its members see everything; no test's group
_CLONE_NEWNS = 0x00020000
_MS_REC = 0x4000
_MS_PRIVATE = 1 << 18
_PR_CAPBSET_DROP = 24
_PR_SET_KEEPCAPS = 8
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_RAISE = 47, 2
_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH = 1, 2
_CAP_SYS_PTRACE = 19
_CAPABILITY_VERSION_3 = 0x20080522

_libc = ctypes.CDLL(None, use_errno=True)
_unshare = _libc.unshare
_mount = _libc.mount
_mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_char_p,
]
_prctl = _libc.prctl
_prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_capset = _libc.capset


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def hidden_proc_unavailable_reason() -> str | None:
    """None if this process can hide processes from its children as above, else why not."""
    if os.geteuid() != 0:
        return "hiding /proc from a node needs root (a mount namespace and another user)"
    if _EXEMPT_GID in os.getgroups() or os.getgid() == _EXEMPT_GID:
        return f"this process is in group {_EXEMPT_GID}, which the hidden /proc exempts"
    return None


def as_another_user() -> None:
    kept = (1 << _CAP_DAC_OVERRIDE) | (1 << _CAP_DAC_READ_SEARCH)
    _check(_prctl(_PR_SET_KEEPCAPS, 1, 0, 0, 0), "keep capabilities")
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)
    header, data = _CapHeader(_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    data[0].effective = data[0].permitted = data[0].inheritable = kept
    _check(_capset(ctypes.byref(header), data), "capset")
    for capability in (_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH):
        _check(_prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_RAISE, capability, 0, 0), "ambient")


def behind_hidden_proc() -> None:
    _check(_unshare(_CLONE_NEWNS), "unshare")
    _check(_mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "mount --make-rprivate /")
    options = f"hidepid=2,gid={_EXEMPT_GID}".encode()
    _check(_mount(b"proc", b"/proc", b"proc", 0, options), "mount proc")
    _check(_prctl(_PR_CAPBSET_DROP, _CAP_SYS_PTRACE, 0, 0, 0), "drop CAP_SYS_PTRACE")


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")
