"""The journal's exceptions: each one a sentence a user or operator can act on."""

from __future__ import annotations


class JournalError(Exception):
    """Base of every error the journal raises on purpose."""


class MessageTooLarge(JournalError):
    """A record is larger than ``max_message_size``; nothing was written."""


class JournalFenced(JournalError):
    """The fencing check failed after a write: this node is no longer master; nothing is acked."""


class JournalWriteFailed(JournalError):
    """Writing or syncing the journal failed; the journal accepts no more writes."""


class JournalClosed(JournalError):
    """The journal was closed (or stopped after a failure) and accepts no more writes."""


class UnsupportedJournal(JournalError):
    """The journal holds segments of a format version this release cannot read; it must not
    serve (it would miss acknowledged messages): upgrade this node."""


class StaleEpoch(JournalError):
    """The share already holds segments of a later epoch; this node must not write."""


class FormatError(ValueError):
    """Bytes that do not follow the journal format."""


class UnsupportedFormatVersion(FormatError):
    """An intact segment header of a format version this reader does not know (not damage)."""
