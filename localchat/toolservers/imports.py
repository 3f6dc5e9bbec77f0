"""Where other desktop apps keep their tool servers, for Settings → Tools → Import.

LM Studio keeps ``mcp.json`` in ``~/.lmstudio`` (``%USERPROFILE%\\.lmstudio`` on Windows; some macOS
versions write it under ``~/.cache/lm-studio``). Claude Desktop keeps ``claude_desktop_config.json``
in its application-support folder. Both use the same ``mcpServers`` object as localchat's own file;
they are only read, never changed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from localchat.toolservers.config import ToolsConfig, merge, read_servers

LM_STUDIO = "LM Studio"
CLAUDE_DESKTOP = "Claude Desktop"
SOURCES = (LM_STUDIO, CLAUDE_DESKTOP)


@dataclass(frozen=True)
class ImportSource:
    name: str  # "LM Studio", "Claude Desktop"
    path: Path | None  # the first candidate file that exists (None: the app's file was not found)
    candidates: tuple[Path, ...]  # where it was looked for


def candidates(source: str, home: Path | None = None, env: Mapping[str, str] | None = None,
               platform: str = sys.platform) -> tuple[Path, ...]:
    """The files ``source`` may keep its servers in on this platform, most likely first."""
    home = home if home is not None else Path.home()
    env = env if env is not None else os.environ
    if source == LM_STUDIO:
        return (home / ".lmstudio" / "mcp.json", home / ".cache" / "lm-studio" / "mcp.json")
    if source == CLAUDE_DESKTOP:
        name = "claude_desktop_config.json"
        if platform == "darwin":
            return (home / "Library" / "Application Support" / "Claude" / name,)
        if platform == "win32":
            appdata = env.get("APPDATA")
            base = Path(appdata) if appdata else home / "AppData" / "Roaming"
            return (base / "Claude" / name,)
        config = env.get("XDG_CONFIG_HOME")
        return ((Path(config) if config else home / ".config") / "Claude" / name,)
    raise ValueError(f"unknown import source {source!r}")


def find(source: str, home: Path | None = None, env: Mapping[str, str] | None = None,
         platform: str = sys.platform) -> ImportSource:
    found = candidates(source, home, env, platform)
    return ImportSource(source, next((p for p in found if p.is_file()), None), found)


def import_into(config: ToolsConfig, source: ImportSource) -> tuple[ToolsConfig, str]:
    """``config`` with the servers of ``source`` added, and the sentence that says what happened."""
    if source.path is None:
        where = " or ".join(str(p) for p in source.candidates)
        return config, f"No {source.name} tool servers were found (looked for {where})."
    try:
        theirs = read_servers(source.path)
    except ValueError as exc:
        return config, f"{source.name}'s file {source.path} could not be read: {exc}."
    merged, sentence = merge(config, theirs.servers, source.name)
    return merged, f"{sentence} (from {source.path})"
