"""``localchat models``: the catalog and the local models, with a fits-in-memory hint."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from localchat.catalog.drafters import Catalog, CatalogEntry
from localchat.catalog.errors import CatalogError
from localchat.catalog.library import Library, LocalModel, default_models_dir, hf_cache_dir
from localchat.catalog.sizes import fits_in_memory, format_bytes, total_ram


def resolve_models_dir(arg: str | None) -> Path:
    """--models-dir, else the models_folder setting, else the app's data folder."""
    if arg:
        return Path(arg).expanduser()
    try:
        from localchat.settings.toml_file import SettingsFile

        folder = SettingsFile().load().settings.models_folder
    except Exception:  # a broken settings file must not stop a headless command
        folder = ""
    return Path(folder).expanduser() if folder else default_models_dir()


def extra_model_folders() -> list[Path]:
    """The extra_model_folders setting (LM Studio's folder, say): read, never changed."""
    try:
        from localchat.settings.toml_file import SettingsFile

        folders = SettingsFile().load().settings.extra_model_folder_list()
    except Exception:  # a broken settings file must not stop a headless command
        folders = []
    return [Path(f).expanduser() for f in folders]


def user_library() -> Library:
    """The models the app lists: the models folder, then huggingface-hub's cache and the other folders."""
    return Library([resolve_models_dir(None)], read_only_dirs=[hf_cache_dir(), *extra_model_folders()])


def load(catalog_path: str | None) -> Catalog:
    from localchat.catalog.drafters import load_catalog

    return load_catalog(catalog_path)


def add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--models-dir", help="models folder (default: the models_folder setting or the app's data folder)"
    )
    p.add_argument("--catalog", help=argparse.SUPPRESS)  # another drafters.toml, for tests and packagers


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("models", help="list the model catalog and the models on this machine")
    add_common(p)
    p.add_argument("--no-hf-cache", action="store_true", help="do not list huggingface-hub's cache")
    p.set_defaults(func=run)


def _entry_line(entry: CatalogEntry, library: Library, ram: int | None) -> str:
    quant = entry.default_quant
    drafter = entry.model_drafter
    size = quant.size + (drafter.size if drafter else 0)
    have_target = library.find_file(quant.filename, quant.repo) is not None
    draft_text = drafter.label if drafter else entry.drafters[0].label
    if drafter is not None and library.find_file(drafter.filename, drafter.repo) is not None:
        draft_text += " (downloaded)"
    mark = "*" if have_target else " "
    flags = []
    if entry.starter:
        flags.append("starter")
    if entry.gated:
        flags.append("gated")
    if not entry.verified:
        flags.append("unverified")
    name = entry.display_name + (f" [{', '.join(flags)}]" if flags else "")
    return (
        f"{mark} {entry.id:<32} {name:<46} {quant.quant:<7} {format_bytes(size):>9}  "
        f"{fits_in_memory(size, ram).value:<5}  {draft_text}"
    )


def _local_line(model: LocalModel, ram: int | None) -> str:
    meta = model.metadata
    if meta is None:
        return f"  {model.name:<50} {'':<10} {'':<7} {format_bytes(model.size):>9}  {'':<5}  {model.error}"
    status = "projector" if meta.is_projector else ("ready" if meta.has_vocab else "no vocabulary")
    line = (
        f"  {model.name:<50} {meta.architecture:<10} {meta.quantization or '?':<7} "
        f"{format_bytes(model.size):>9}  {fits_in_memory(model.size, ram).value:<5}  "
        f"{meta.size_label or ''} {status}"
    )
    return line.rstrip()


def run(args: argparse.Namespace) -> int:
    try:
        catalog = load(args.catalog)
    except CatalogError as exc:
        print(f"localchat: {exc}", file=sys.stderr)
        return 1
    models_dir = resolve_models_dir(args.models_dir)
    # With --models-dir (a test, a script) only that folder counts; else the user's other folders too.
    others = [] if args.no_hf_cache else [hf_cache_dir()]
    others += [] if args.models_dir else extra_model_folders()
    dirs = [models_dir, *others]
    library = Library([models_dir], read_only_dirs=others)
    ram = total_ram()
    print(f"Catalog ({catalog.source}); * = downloaded, fits = in {format_bytes(ram)} of memory")
    print(f"  {'ID':<32} {'MODEL':<46} {'QUANT':<7} {'SIZE':>9}  {'FITS':<5}  DRAFTER")
    for entry in catalog.entries:
        print(_entry_line(entry, library, ram))
    if not args.models_dir:  # what the app last measured on this computer (catalog/starter_choice.py)
        from localchat.catalog import starter_choice
        from localchat.settings import folders

        measured = starter_choice.load(folders.machine_measure_path())
        choice = starter_choice.choose(catalog, measured, ram) if measured is not None else None
        if choice is not None:
            print(f"  {choice.sentence} (`localchat pull {choice.chosen.entry.id}`)")
    models = library.models()
    print()
    print(f"Local models ({', '.join(str(d) for d in dirs)})")
    if not models:
        print("  none yet: `localchat pull ID` downloads a catalog entry with its drafter")
        return 0
    print(f"  {'FILE':<50} {'ARCH':<10} {'QUANT':<7} {'SIZE':>9}  {'FITS':<5}  PARAMS")
    for model in models:
        print(_local_line(model, ram))
    return 0
