"""Where a model's layers go: this machine (CPU or its accelerators) and RPC workers.

llama.cpp offloads ``n_gpu_layers`` layers to the devices in the model's list,
split between them by ``tensor_split`` (default: their free memory); layers
not offloaded stay on the local CPU. A CPU-only machine with workers is not a
device of its own in that list, so its share is the layers NOT offloaded: with
a share s for this machine, ``round((n_layer + 1) * (1 - s))`` layers go to the
workers (the ``+ 1`` is the output layer, which llama.cpp counts as one).

Shares default to free memory (this machine: available RAM or its
accelerators' free memory; a worker: what its device reports), and
``--tensor-split`` overrides them: one proportion for this machine, then one
per worker, in the order given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import psutil

from localchat.engine.errors import ModelLoadError

if TYPE_CHECKING:
    from localchat.engine.devices import Device


@dataclass(frozen=True)
class Placement:
    """An explicit device list for one model load."""

    devices: list[Device] = field(default_factory=list)
    tensor_split: tuple[float, ...] = ()
    gpu_layers: int = 0
    description: str = "local"


def describe(n_workers: int, local_share: float) -> str:
    if n_workers == 0:
        return "local"
    workers = f"{n_workers} worker" + ("s" if n_workers != 1 else "")
    return workers if local_share <= 0 else f"local + {workers}"


def split_target(
    local: list[Device],
    workers: list[list[Device]],
    n_layer: int,
    tensor_split: tuple[float, ...] = (),
    local_free: int | None = None,
) -> Placement:
    """The target's placement over this machine's accelerators (``local``) and each worker's devices."""
    n_workers = len(workers)
    if tensor_split:
        if len(tensor_split) != 1 + n_workers:
            raise ModelLoadError(
                f"The tensor split has {len(tensor_split)} values; give {1 + n_workers}: one for this "
                f"computer, then one for each of the {n_workers} worker(s)."
            )
        if any(v < 0 for v in tensor_split) or sum(tensor_split) <= 0:
            raise ModelLoadError("The tensor split needs non-negative values that are not all zero.")
        shares = list(tensor_split)
    else:
        mine = sum(d.free for d in local) if local else (
            local_free if local_free is not None else psutil.virtual_memory().available
        )
        shares = [float(mine)] + [float(sum(d.free for d in devs)) for devs in workers]
    total = sum(shares)
    shares = [s / total for s in shares]
    worker_devices = [d for devs in workers for d in devs]
    per_worker: list[float] = []
    for share, devs in zip(shares[1:], workers, strict=True):
        per_worker += [share / max(1, len(devs))] * len(devs)
    if local:
        split = tuple([shares[0] / len(local)] * len(local) + per_worker)
        return Placement(list(local) + worker_devices, split, 999, describe(n_workers, shares[0]))
    offloaded = round((n_layer + 1) * (1.0 - shares[0]))
    if n_workers and offloaded == 0:
        offloaded = 1  # a worker that was asked for gets at least a layer, or the user sees no effect
    return Placement(worker_devices, tuple(per_worker), offloaded, describe(n_workers, shares[0]))
