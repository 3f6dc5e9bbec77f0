"""The model catalog: drafters.toml, which targets localchat offers and what drafts for each.

The file is data, not code, so a packager or an air-gapped site can edit it.
It is validated strictly on load (unknown keys, missing or mistyped fields,
duplicate ids, unknown drafter kinds, a drafter larger than its target,
file names that could escape the models folder) and every error names the
file, the entry and the field.

The shipped copy is ``localchat/data/drafters.toml``, read through
``importlib.resources`` so it is found the same way in a checkout, an
installed wheel and a frozen bundle; ``drafters.toml`` at the repository root
is the copy people read and edit, and a test keeps the two byte-identical.
"""

from __future__ import annotations

import re
import string
import tomllib
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any

from localchat.catalog.errors import CatalogError
from localchat.settings.drafter_kind import DrafterKind
from localchat.settings.options import DRAFT_TOKENS_DEFAULT, DRAFT_TOKENS_MAX, DRAFT_TOKENS_MIN

SCHEMA_VERSION = 1

# The kinds a [[model.drafter]] may name (the shared vocabulary, settings.drafter_kind).
DRAFTER_KINDS = (DrafterKind.MODEL, DrafterKind.NGRAM, DrafterKind.MTP)

# Matched whole (fullmatch): "$" alone lets a trailing line break through.
_ID_RE = re.compile(r"[a-z0-9][a-z0-9._-]*")
_REPO_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")
_SHA_RE = re.compile(r"[0-9a-f]{64}")
# A package name as PEP 508 allows it: pip is given "NAME==VERSION", so a name starting with "-" would
# be read as one of pip's options. A prefix has a part number appended, so it may end in "-" or "_".
_PACKAGE_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
_PACKAGE_PREFIX_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_VERSION_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+!_-]*")
# A member's placeholders: {n} or {i}, with at most a zero-padded width ({n:02d}).
_MEMBER_FIELDS = ("n", "i")
_MEMBER_SPEC_RE = re.compile(r"0?[1-9]?d?")
# More parts than any published model needs (a 400 GB file in 100 MB wheels is 4,000): a larger
# count is a mistake, and expanding millions of parts took over a minute.
MAX_PYPI_PARTS = 10_000


@dataclass(frozen=True)
class QuantFile:
    """One downloadable quantization of a target: a single GGUF file in a hub repo."""

    quant: str  # "Q4_K_M"
    repo: str  # "Qwen/Qwen2.5-Coder-7B-Instruct-GGUF"
    filename: str  # path inside the repo
    size: int  # bytes
    license: str
    sha256: str = ""  # optional; the hub's own metadata is always checked
    pypi: str = ""  # key of a PyPI-hosted copy of the same file, if any
    verified: bool = True  # repo and file name checked against a public listing


@dataclass(frozen=True)
class DrafterEntry:
    """The catalog's word on what drafts for a target: a draft model, n-gram lookup, or MTP heads.

    Not to be confused with the engine's draft sources (engine.draft_sources), which produce the
    tokens: this is a line of drafters.toml, with the file to download if there is one.
    """

    kind: DrafterKind  # one of DRAFTER_KINDS
    draft_tokens: int = DRAFT_TOKENS_DEFAULT  # recommended draft length
    repo: str = ""
    filename: str = ""
    size: int = 0
    license: str = ""
    sha256: str = ""
    pypi: str = ""
    experimental: bool = False  # the engine does not support it yet, or support is new
    verified: bool = True
    notes: str = ""

    @property
    def label(self) -> str:
        if self.kind == DrafterKind.NGRAM:
            return "n-gram prompt lookup"
        if not self.filename:
            return self.kind + (" (experimental)" if self.experimental else "")
        from localchat.catalog.names import drafter_name  # names reads this module's types

        # "Qwen2.5-Coder 0.5B Instruct · Q4_K_M", as the window names the loaded drafter, not its file
        return drafter_name(self) + (" (experimental)" if self.experimental else "")


@dataclass(frozen=True)
class CatalogEntry:
    id: str
    display_name: str
    family: str
    params: str  # "7.6B"
    gated: bool
    quants: tuple[QuantFile, ...]
    drafters: tuple[DrafterEntry, ...]
    verified: bool = True
    starter: bool = False
    notes: str = ""

    @property
    def default_quant(self) -> QuantFile:
        return self.quants[0]

    @property
    def model_drafter(self) -> DrafterEntry | None:
        """The first usable draft model (not experimental), if the entry lists one."""
        for d in self.drafters:
            if d.kind == DrafterKind.MODEL and not d.experimental:
                return d
        return None

    def quant(self, name: str | None) -> QuantFile:
        """The quantization called ``name`` (case-insensitive), or the default one for None."""
        if name is None:
            return self.default_quant
        for q in self.quants:
            if q.quant.lower() == name.lower():
                return q
        offered = ", ".join(q.quant for q in self.quants)
        raise KeyError(f"{self.display_name} is not offered as {name}; the catalog has {offered}")


@dataclass(frozen=True)
class PypiPart:
    package: str
    version: str
    member: str


@dataclass(frozen=True)
class PypiFile:
    """A GGUF published on a package index as wheel data, in part order (see docs/TEST-MODELS.md)."""

    key: str
    filename: str
    sha256: str
    size: int
    parts: tuple[PypiPart, ...]


@dataclass(frozen=True)
class Catalog:
    schema_version: int
    entries: tuple[CatalogEntry, ...]
    pypi: tuple[PypiFile, ...]
    source: str  # where it was loaded from, for messages

    def get(self, entry_id: str) -> CatalogEntry:
        for e in self.entries:
            if e.id == entry_id:
                return e
        raise KeyError(entry_id)

    def pypi_file(self, key: str) -> PypiFile:
        for p in self.pypi:
            if p.key == key:
                return p
        raise KeyError(key)

    @property
    def starter(self) -> CatalogEntry | None:
        return next((e for e in self.entries if e.starter), None)

    def find_target_file(self, filename: str) -> tuple[CatalogEntry, QuantFile] | None:
        """The entry and quantization whose file is called ``filename`` (base name, case-insensitive)."""
        name = file_key(filename)
        for e in self.entries:
            for q in e.quants:
                if file_key(q.filename) == name:
                    return e, q
        return None


def file_key(path: str) -> str:
    """A model file's base name as the catalog matches it: case-insensitive, either path separator."""
    return PurePosixPath(path.replace("\\", "/")).name.lower()


def shipped_catalog_text() -> str:
    return resources.files("localchat").joinpath("data", "drafters.toml").read_text(encoding="utf-8")


def load_catalog(path: str | Path | None = None) -> Catalog:
    """Load and validate drafters.toml; ``None`` loads the copy shipped in the package."""
    if path is None:
        return parse_catalog(shipped_catalog_text(), "drafters.toml (shipped)")
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise CatalogError(p, None, None, f"the file cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise CatalogError(p, None, None, "the file is not UTF-8 text") from None
    return parse_catalog(text, str(p))


def parse_catalog(text: str, source: str) -> Catalog:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(source, None, None, f"it is not valid TOML ({exc})") from None
    v = _Validator(source)
    v.keys(data, None, "", required={"schema_version"}, optional={"model", "pypi"})
    version = v.typed(data, None, "schema_version", int)
    if version != SCHEMA_VERSION:
        raise CatalogError(
            source,
            None,
            "schema_version",
            f"version {version} is not supported (this localchat reads {SCHEMA_VERSION})",
        )
    pypi = tuple(v.pypi(i, raw) for i, raw in enumerate(v.table_list(data, "pypi")))
    seen_keys: set[str] = set()
    for p in pypi:
        if p.key in seen_keys:
            raise CatalogError(source, p.key, "key", "the same PyPI-hosted key appears twice")
        seen_keys.add(p.key)

    entries: list[CatalogEntry] = []
    seen_ids: set[str] = set()
    for i, raw in enumerate(v.table_list(data, "model")):
        entry = v.entry(i, raw, seen_keys)
        if entry.id in seen_ids:
            raise CatalogError(source, entry.id, "id", "the same id appears twice")
        seen_ids.add(entry.id)
        entries.append(entry)
    by_key = {p.key: p for p in pypi}
    for entry in entries:
        refs = [(f"quant[{i}].pypi", q.filename, q.pypi) for i, q in enumerate(entry.quants)]
        refs += [(f"drafter[{i}].pypi", d.filename, d.pypi) for i, d in enumerate(entry.drafters)]
        for field, filename, key in refs:
            if key and by_key[key].filename != PurePosixPath(filename).name:
                raise CatalogError(
                    source,
                    entry.id,
                    field,
                    (
                        f"the PyPI-hosted file {by_key[key].filename!r} must have the same name as "
                        f"{PurePosixPath(filename).name!r}, so either source finds the other's download"
                    ),
                )
    if sum(e.starter for e in entries) > 1:
        starters = [e.id for e in entries if e.starter]
        raise CatalogError(
            source, starters[1], "starter", f"only one entry may be the starter ({starters[0]} is)"
        )
    return Catalog(SCHEMA_VERSION, tuple(entries), pypi, source)


class _Validator:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, entry: str | None, field: str, problem: str) -> CatalogError:
        return CatalogError(self.source, entry, field or None, problem)

    def keys(
        self, table: Mapping[str, Any], entry: str | None, prefix: str, required: set[str], optional: set[str]
    ) -> None:
        for key in table:
            if key not in required and key not in optional:
                allowed = ", ".join(sorted(required | optional))
                raise self.fail(entry, prefix + key, f"unknown key (allowed: {allowed})")
        for key in sorted(required):
            if key not in table:
                raise self.fail(entry, prefix + key, "this required field is missing")

    def typed(
        self, table: Mapping[str, Any], entry: str | None, key: str, kind: type, prefix: str = ""
    ) -> Any:
        value = table[key]
        # bool is an int in Python; TOML keeps them apart, and so do we.
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise self.fail(entry, prefix + key, f"expected {_TYPE_NAMES[kind]}, found {value!r}")
        return value

    def opt(
        self,
        table: Mapping[str, Any],
        entry: str | None,
        key: str,
        kind: type,
        default: Any,
        prefix: str = "",
    ) -> Any:
        return self.typed(table, entry, key, kind, prefix) if key in table else default

    def table_list(self, data: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
            raise self.fail(None, key, f"expected [[{key}]] tables")
        return value

    def text(self, table: Mapping[str, Any], entry: str | None, key: str, prefix: str = "") -> str:
        """A required one-line text."""
        value = self.typed(table, entry, key, str, prefix)
        if not value.strip():
            raise self.fail(entry, prefix + key, "must not be empty")
        return self.one_line(str(value), entry, prefix + key)

    def opt_line(
        self, table: Mapping[str, Any], entry: str | None, key: str, default: str, prefix: str = ""
    ) -> str:
        """An optional one-line text."""
        return self.one_line(str(self.opt(table, entry, key, str, default, prefix)), entry, prefix + key)

    def one_line(self, value: str, entry: str | None, field: str) -> str:
        self.check(is_one_line(value), entry, field, f"{value!r} must be one line, without a line break")
        return value

    def check(self, ok: bool, entry: str | None, field: str, problem: str) -> None:
        if not ok:
            raise self.fail(entry, field, problem)

    def repo_file(self, table: Mapping[str, Any], eid: str, prefix: str) -> tuple[str, str]:
        repo = self.text(table, eid, "repo", prefix)
        self.check(
            bool(_REPO_RE.fullmatch(repo)) and ".." not in repo,
            eid,
            prefix + "repo",
            f"{repo!r} is not a hub repository id like 'owner/name'",
        )
        filename = self.text(table, eid, "filename", prefix)
        self.check(
            is_safe_relative_path(filename),
            eid,
            prefix + "filename",
            f"{filename!r} must be a relative path inside the repository (no '..', no leading '/')",
        )
        self.check(
            filename.lower().endswith(".gguf"), eid, prefix + "filename", f"{filename!r} is not a .gguf file"
        )
        return repo, filename

    def size(self, table: Mapping[str, Any], eid: str, prefix: str) -> int:
        size = int(self.typed(table, eid, "size", int, prefix))
        self.check(size > 0, eid, prefix + "size", f"must be a positive number of bytes, found {size}")
        return size

    def sha(self, table: Mapping[str, Any], eid: str, prefix: str) -> str:
        sha = str(self.opt(table, eid, "sha256", str, "", prefix)).lower()
        self.check(
            sha == "" or bool(_SHA_RE.fullmatch(sha)),
            eid,
            prefix + "sha256",
            "expected 64 hexadecimal digits",
        )
        return sha

    def pypi_ref(self, table: Mapping[str, Any], eid: str, prefix: str, keys: set[str]) -> str:
        key = str(self.opt(table, eid, "pypi", str, "", prefix))
        self.check(key == "" or key in keys, eid, prefix + "pypi", f"no [[pypi]] entry has key {key!r}")
        return key

    def entry(self, index: int, raw: dict[str, Any], pypi_keys: set[str]) -> CatalogEntry:
        eid: str = raw["id"] if isinstance(raw.get("id"), str) and is_one_line(raw["id"]) else f"#{index + 1}"
        self.keys(
            raw,
            eid,
            "",
            required={"id", "display_name", "family", "params", "quant", "drafter"},
            optional={"license", "gated", "verified", "starter", "notes"},
        )
        self.check(bool(_ID_RE.fullmatch(eid)), eid, "id", "use lower-case letters, digits, '.', '_' and '-'")
        display_name = self.text(raw, eid, "display_name")
        family = self.text(raw, eid, "family")
        params = self.text(raw, eid, "params")
        license_ = self.opt_line(raw, eid, "license", "")
        gated = bool(self.opt(raw, eid, "gated", bool, False))
        verified = bool(self.opt(raw, eid, "verified", bool, True))
        starter = bool(self.opt(raw, eid, "starter", bool, False))
        notes = str(self.opt(raw, eid, "notes", str, ""))

        raw_quants = raw["quant"]
        self.check(
            isinstance(raw_quants, list)
            and len(raw_quants) > 0
            and all(isinstance(q, dict) for q in raw_quants),
            eid,
            "quant",
            "expected at least one [[model.quant]] table",
        )
        quants = []
        for qi, q in enumerate(raw_quants):
            prefix = f"quant[{qi}]."
            self.keys(
                q,
                eid,
                prefix,
                required={"quant", "repo", "filename", "size"},
                optional={"license", "sha256", "pypi", "verified"},
            )
            repo, filename = self.repo_file(q, eid, prefix)
            q_license = self.opt_line(q, eid, "license", license_, prefix)
            self.check(bool(q_license), eid, prefix + "license", "no license given here or on the entry")
            quants.append(
                QuantFile(
                    quant=self.text(q, eid, "quant", prefix),
                    repo=repo,
                    filename=filename,
                    size=self.size(q, eid, prefix),
                    license=q_license,
                    sha256=self.sha(q, eid, prefix),
                    pypi=self.pypi_ref(q, eid, prefix, pypi_keys),
                    verified=bool(self.opt(q, eid, "verified", bool, verified, prefix)),
                )
            )
        smallest = min(quants, key=lambda q: q.size)

        raw_drafters = raw["drafter"]
        self.check(
            isinstance(raw_drafters, list)
            and len(raw_drafters) > 0
            and all(isinstance(d, dict) for d in raw_drafters),
            eid,
            "drafter",
            'expected at least one [[model.drafter]] table (kind = "ngram" needs no model)',
        )
        drafters = []
        for di, d in enumerate(raw_drafters):
            prefix = f"drafter[{di}]."
            self.keys(
                d,
                eid,
                prefix,
                required={"kind"},
                optional={
                    "draft_tokens",
                    "repo",
                    "filename",
                    "size",
                    "license",
                    "sha256",
                    "pypi",
                    "experimental",
                    "verified",
                    "notes",
                },
            )
            kind_text = self.text(d, eid, "kind", prefix)
            self.check(
                kind_text in DRAFTER_KINDS,
                eid,
                prefix + "kind",
                f"unknown kind {kind_text!r} (expected one of {', '.join(DRAFTER_KINDS)})",
            )
            kind = DrafterKind(kind_text)
            draft_tokens = int(self.opt(d, eid, "draft_tokens", int, DRAFT_TOKENS_DEFAULT, prefix))
            self.check(
                DRAFT_TOKENS_MIN <= draft_tokens <= DRAFT_TOKENS_MAX,
                eid,
                prefix + "draft_tokens",
                f"must be between {DRAFT_TOKENS_MIN} and {DRAFT_TOKENS_MAX}, found {draft_tokens}",
            )
            repo = filename = ""
            size = 0
            if kind is DrafterKind.MODEL or "repo" in d or "filename" in d:
                for key in ("repo", "filename", "size"):
                    self.check(key in d, eid, prefix + key, f"a {kind} drafter with a file needs {key}")
                repo, filename = self.repo_file(d, eid, prefix)
                size = self.size(d, eid, prefix)
                self.check(
                    size < smallest.size,
                    eid,
                    prefix + "size",
                    f"the drafter ({size:,} bytes) is not smaller than its target's "
                    f"{smallest.quant} file ({smallest.size:,} bytes)",
                )
            elif kind is DrafterKind.NGRAM:
                for key in ("size", "pypi", "sha256"):
                    self.check(key not in d, eid, prefix + key, "an ngram drafter has no file")
            experimental = bool(self.opt(d, eid, "experimental", bool, kind is DrafterKind.MTP, prefix))
            self.check(
                kind is not DrafterKind.MTP or experimental,
                eid,
                prefix + "experimental",
                "mtp drafters stay experimental until the engine supports them",
            )
            drafters.append(
                DrafterEntry(
                    kind=kind,
                    draft_tokens=draft_tokens,
                    repo=repo,
                    filename=filename,
                    size=size,
                    license=self.opt_line(d, eid, "license", license_ if repo else "", prefix),
                    sha256=self.sha(d, eid, prefix),
                    pypi=self.pypi_ref(d, eid, prefix, pypi_keys),
                    experimental=experimental,
                    verified=bool(self.opt(d, eid, "verified", bool, verified, prefix)),
                    notes=str(self.opt(d, eid, "notes", str, "", prefix)),
                )
            )
        return CatalogEntry(
            id=eid,
            display_name=display_name,
            family=family,
            params=params,
            gated=gated,
            quants=tuple(quants),
            drafters=tuple(drafters),
            verified=verified,
            starter=starter,
            notes=notes,
        )

    def pypi(self, index: int, raw: dict[str, Any]) -> PypiFile:
        named = isinstance(raw.get("key"), str) and is_one_line(raw["key"])
        key: str = raw["key"] if named else f"pypi #{index + 1}"
        self.keys(
            raw,
            key,
            "",
            required={"key", "filename", "sha256", "size", "version", "member"},
            optional={"package", "package_prefix", "count"},
        )
        self.text(raw, key, "key")
        filename = self.text(raw, key, "filename")
        self.check(
            is_safe_relative_path(filename) and "/" not in filename,
            key,
            "filename",
            f"{filename!r} must be a plain file name",
        )
        sha = self.sha(raw, key, "")
        self.check(bool(sha), key, "sha256", "this required field is missing")
        size = self.size(raw, key, "")
        version = self.text(raw, key, "version")
        self.check(
            bool(_VERSION_RE.fullmatch(version)), key, "version", f"{version!r} is not a package version"
        )
        member = self.text(raw, key, "member")
        self.member_placeholders(member, key)
        has_package, has_prefix = "package" in raw, "package_prefix" in raw
        self.check(
            has_package != has_prefix,
            key,
            "package",
            "give either package (one wheel) or package_prefix and count (parts 1..count)",
        )
        if has_package:
            self.check("count" not in raw, key, "count", "count goes with package_prefix, not package")
            names: list[Callable[[int], str]] = [lambda n: str(raw["package"])]
            count = 1
            package = self.text(raw, key, "package")
            self.check(
                bool(_PACKAGE_RE.fullmatch(package)),
                key,
                "package",
                f"{package!r} is not a package name (letters, digits, '.', '_' and '-', "
                "starting and ending with a letter or digit)",
            )
        else:
            prefix = self.text(raw, key, "package_prefix")
            self.check(
                bool(_PACKAGE_PREFIX_RE.fullmatch(prefix)),
                key,
                "package_prefix",
                f"{prefix!r} does not start a package name (letters, digits, '.', '_' and '-', "
                "starting with a letter or digit)",
            )
            self.check("count" in raw, key, "count", "this required field is missing")
            count = int(self.typed(raw, key, "count", int))
            self.check(count >= 1, key, "count", f"must be at least 1, found {count}")
            most = min(MAX_PYPI_PARTS, size)
            problem = f"must be at most {most:,} for a {size:,}-byte file, found {count:,}"
            self.check(count <= most, key, "count", problem)
            names = [lambda n: f"{prefix}{n}"]
        parts = []
        for n in range(1, count + 1):
            # {n} counts parts from 1, {i} from 0, as the published packages do.
            member_n = member.format(n=n, i=n - 1)
            self.check(is_safe_relative_path(member_n), key, "member", f"{member_n!r} is not a relative path")
            parts.append(PypiPart(names[0](n), version, member_n))
        return PypiFile(key=key, filename=filename, sha256=sha, size=size, parts=tuple(parts))


    def member_placeholders(self, member: str, key: str) -> None:
        """Only {n} and {i}, each with at most a zero-padded width: str.format would otherwise reach
        attributes and items ({n.real}, {n[0]}, raising) or pad to any width ({n:>999999999})."""
        hint = "use {n} or {i}, with at most a width such as {n:02d}"
        try:
            fields = [(name, spec, conv) for _, name, spec, conv in string.Formatter().parse(member)]
        except ValueError as exc:
            raise self.fail(key, "member", f"bad placeholder in {member!r} ({exc}; {hint})") from None
        for name, spec, conv in fields:
            if name is None:
                continue
            self.check(
                name in _MEMBER_FIELDS and conv is None and bool(_MEMBER_SPEC_RE.fullmatch(spec or "")),
                key,
                "member",
                f"bad placeholder {{{name}{'!' + conv if conv else ''}{':' + spec if spec else ''}}} "
                f"in {member!r} ({hint})",
            )


_TYPE_NAMES: dict[type, str] = {str: "a string", int: "an integer", bool: "true or false", float: "a number"}


def is_one_line(text: str) -> bool:
    """No line break or other control character (a name shown on one line, passed to pip, logged)."""
    return not any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in text)


def is_safe_relative_path(name: str) -> bool:
    """True for 'a.gguf' or 'Q4_K_M/a-00001-of-00002.gguf'; False for '../x', '/x', 'C:x', 'a\\b',
    and for a name with a line break or other control character."""
    if not name or "\\" in name or not is_one_line(name) or name.startswith("/") or ":" in name:
        return False
    parts = PurePosixPath(name).parts
    return all(p not in ("", ".", "..") for p in parts)
