"""Errors raised by the catalog layer. Each message is one sentence a user can act on."""

from __future__ import annotations


class GgufError(Exception):
    """A file is not a readable GGUF model (empty, truncated, another format, unsupported version)."""

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path} cannot be used as a model: {problem}.")


class CatalogError(Exception):
    """drafters.toml is malformed; the message names the file, the entry and the field."""

    def __init__(self, file: object, entry: str | None, field: str | None, problem: str) -> None:
        self.file = str(file)
        self.entry = entry
        self.field = field
        self.problem = problem
        where = self.file
        if entry:
            where += f", entry '{entry}'"
        if field:
            where += f", field '{field}'"
        super().__init__(f"{where}: {problem}.")
