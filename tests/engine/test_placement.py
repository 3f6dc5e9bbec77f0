"""How the target's layers are shared between this computer and RPC workers."""

from __future__ import annotations

import pytest

from localchat.engine.devices import Device
from localchat.engine.errors import ModelLoadError
from localchat.engine.placement import describe, split_target

GIB = 1 << 30


def _dev(handle: int, free_gib: float, kind: int = 1) -> Device:
    return Device(handle, f"RPC{handle}", "worker", kind, int(free_gib * GIB), int(free_gib * GIB))


def test_cpu_machine_keeps_its_share_of_layers_by_free_memory() -> None:
    p = split_target([], [[_dev(1, 8)]], n_layer=27, local_free=8 * GIB)
    assert p.gpu_layers == 14  # half of 28 (27 blocks + output)
    assert p.description == "local + 1 worker"
    assert [d.handle for d in p.devices] == [1]


def test_explicit_split_and_two_workers() -> None:
    p = split_target([], [[_dev(1, 8)], [_dev(2, 8)]], n_layer=27, tensor_split=(0, 1, 3))
    assert p.gpu_layers == 28 and p.description == "2 workers"
    assert p.tensor_split == pytest.approx((0.25, 0.75))


def test_local_gpus_are_devices_of_their_own() -> None:
    gpu = Device(9, "CUDA0", "gpu", 1, 24 * GIB, 24 * GIB)
    p = split_target([gpu], [[_dev(1, 8)]], n_layer=40)
    assert [d.handle for d in p.devices] == [9, 1]
    assert p.gpu_layers == 999
    assert p.tensor_split == pytest.approx((0.75, 0.25))


def test_a_worker_always_gets_a_layer() -> None:
    p = split_target([], [[_dev(1, 0.001)]], n_layer=27, local_free=1000 * GIB)
    assert p.gpu_layers == 1


def test_wrong_split_length_is_a_sentence() -> None:
    with pytest.raises(ModelLoadError, match="one for this computer"):
        split_target([], [[_dev(1, 8)]], n_layer=27, tensor_split=(1, 1, 1))


def test_describe() -> None:
    assert describe(0, 1) == "local"
    assert describe(2, 0.5) == "local + 2 workers"
