"""What a model file is called in the window: the catalog's name and quantization, else its file name.

A GGUF's own ``general.name`` is not used: publishers copy it from the model they
converted, so the Q4_K_M file of the starter's drafter calls itself
"Qwen2.5 Coder 0.5B Instruct AWQ". The catalog knows what the file is: a target
is its entry's ``display_name`` and quantization ("Qwen2.5-Coder 1.5B Instruct · Q4_K_M");
a drafter, which has no entry of its own, is named from its hub repo in the
same style ("Qwen2.5-Coder 0.5B Instruct · Q4_K_M"). A file the catalog does
not list keeps its file name, which is what the user chose on disk.

The HTTP API's model id (``served_id``) follows the same rule, once for both
servers (the app's and ``localchat serve``) and the README: a catalog model is
its entry's id ("qwen2.5-coder-1.5b-instruct", whichever quantization is
loaded), any other file its name without ``.gguf``. The servers accept the
file's own name too.
"""

from __future__ import annotations

import functools
import logging
import re
from pathlib import PurePosixPath

from localchat.catalog.drafters import Catalog, DrafterEntry, load_catalog

log = logging.getLogger(__name__)

SEPARATOR = " · "
# The quantization at the end of a GGUF file name: q4_k_m, Q8_0, IQ4_XS, f16, bf16.
_QUANT_RE = re.compile(r"[-_.]((?:I?Q\d(?:_[A-Za-z0-9]+)*)|BF16|F16|F32)$", re.IGNORECASE)
# The parameter count in a repo name ("0.5B", "135M", "E4B"): where words start.
_PARAMS_RE = re.compile(r"-(E?\d+(?:\.\d+)?[BM])(?=-|$)", re.IGNORECASE)


def file_name(path: str) -> str:
    """The file name at the end of ``path``, whichever separator the path uses."""
    return PurePosixPath(path.replace("\\", "/")).name


def file_stem(path: str) -> str:
    """The file name without its ``.gguf`` ending (any case): what the HTTP API calls a model."""
    name = file_name(path)
    return name[: -len(".gguf")] if name.lower().endswith(".gguf") else name


def quant_of(filename: str) -> str:
    """The quantization a GGUF file name ends in ("Q4_K_M"), or "" when it names none."""
    stem = file_stem(filename)
    match = _QUANT_RE.search(stem)
    return match.group(1).upper() if match else ""


def drafter_name(drafter: DrafterEntry) -> str:
    """A draft model's name from its repo ("Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF") and file."""
    repo = drafter.repo.rsplit("/", 1)[-1]
    base = re.sub(r"[-_]GGUF$", "", repo, flags=re.IGNORECASE)
    quant = quant_of(drafter.filename)
    if quant:  # "gemma-3-1b-it-qat-q4_0": the quantization is said once, at the end
        base = re.sub(rf"[-_]{re.escape(quant)}$", "", base, flags=re.IGNORECASE)
    match = _PARAMS_RE.search(base)
    if match is not None:
        # "Qwen2.5-Coder-0.5B-Instruct" -> "Qwen2.5-Coder 0.5B Instruct", as the catalog writes targets.
        base = base[: match.start()] + " " + base[match.start() + 1 :].replace("-", " ")
    return base + (SEPARATOR + quant if quant else "")


def model_name(path: str, catalog: Catalog | None) -> str:
    """The name the window shows for the model file at ``path``."""
    name = file_name(path)
    if catalog is None or not name:
        return name
    found = catalog.find_target_file(name)
    if found is not None:
        entry, quant = found
        return entry.display_name + SEPARATOR + quant.quant
    lowered = name.lower()
    for entry in catalog.entries:
        for drafter in entry.drafters:
            if drafter.filename and file_name(drafter.filename).lower() == lowered:
                return drafter_name(drafter)
    return name


def served_id(path: str, catalog: Catalog | None) -> str:
    """The model id the API servers give the file at ``path``: its catalog entry's id, else its stem."""
    found = catalog.find_target_file(file_name(path)) if catalog is not None else None
    return found[0].id if found is not None else file_stem(path)


def shipped_served_id(path: str) -> str:
    """``served_id`` against the catalog shipped with the app (read once)."""
    return served_id(path, _shipped())


@functools.cache
def _shipped() -> Catalog | None:
    try:
        return load_catalog()
    except Exception as exc:  # a broken catalog must not keep a model from being named
        log.warning("catalog: %s", exc)
        return None


def shipped_model_name(path: str) -> str:
    """``model_name`` against the catalog shipped with the app (read once)."""
    return model_name(path, _shipped())
