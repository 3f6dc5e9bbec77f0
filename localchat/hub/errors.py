"""Errors raised by the download layer. Messages are sentences a user can act on.

Every error is a DownloadError, so a caller that only shows the sentence needs
one ``except``; the subclasses let the UI offer the right next step (a login
button for AccessDeniedError, "free some space" for NotEnoughSpaceError, a
quiet reset for DownloadCancelled).
"""

from __future__ import annotations


class DownloadError(Exception):
    """A model file could not be fetched or verified."""


class DownloadCancelled(DownloadError):
    """The user cancelled; what was downloaded so far is kept for a later resume."""


class AccessDeniedError(DownloadError):
    """The hub refused access (401/403): a gated repository, a missing or weak token."""

    def __init__(self, message: str, gated: bool = False) -> None:
        super().__init__(message)
        self.gated = gated


class RemoteNotFoundError(DownloadError):
    """The repository, revision or file does not exist on the hub (404)."""


class NotEnoughSpaceError(DownloadError):
    """The models folder's disk cannot hold the files (checked before starting, or the disk filled up)."""


class ChecksumMismatchError(DownloadError):
    """The downloaded bytes do not have the SHA-256 the hub published; the file was discarded."""


class UnsafePathError(DownloadError):
    """A repository id or file name would place a file outside the models folder."""


class NotAvailableOfflineError(DownloadError):
    """Offline mode is on (or the hub cannot be reached) and the file is not on disk yet."""


class ConnectionLostError(DownloadError):
    """The hub could not be reached, or the connection dropped and did not come back."""


class AlreadyDownloadingError(DownloadError):
    """Another job (this app or another process) is downloading the same file right now."""
