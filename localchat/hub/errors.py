"""Errors raised by the download layer. Messages are sentences a user can act on."""

from __future__ import annotations


class DownloadError(Exception):
    """A model file could not be fetched or verified."""
