"""ggml's devices through its C API: local accelerators, RPC workers, and the RPC server.

llama-cpp-python binds llama.cpp's functions but not ggml's device registry,
and it dropped its ``rpc_servers`` parameter; this module declares the few
ggml functions localchat needs on the library llama-cpp-python already loads
(``llama_cpp._ggml.libggml``), the way llama.cpp's own ``--rpc`` and
``rpc-server`` use them:

- a worker's endpoint is added with the RPC backend's ``add_server`` function
  (found through ``ggml_backend_reg_get_proc_address``) and its registry
  registered, BEFORE a model loads;
- the target then loads on an explicit NULL-terminated device list (local
  accelerators + the workers), with ``tensor_split`` giving each its share;
- the drafter loads on the local accelerators only (an empty list: the CPU).

Every worker is probed in pure Python first (``rpc_wire.probe``): ggml's RPC
client aborts the process on a worker it cannot reach or whose protocol differs.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from dataclasses import dataclass
from typing import Any

from localchat.engine.errors import ModelLoadError
from localchat.engine.rpc_wire import Endpoint, probe

log = logging.getLogger(__name__)

DEV_CPU, DEV_GPU, DEV_IGPU, DEV_ACCEL, DEV_META = range(5)

RPC_MISSING = (
    "This installation of localchat has no RPC backend, so it cannot use workers. Reinstall "
    "llama-cpp-python with it: CMAKE_ARGS=\"-DGGML_RPC=on\" pip install --force-reinstall --no-cache-dir "
    "--no-deps llama-cpp-python==0.3.36 (the bundles from the releases page have it)."
)

_lock = threading.Lock()
_lib: Any = None
_added: dict[Endpoint, list[int]] = {}  # endpoint -> its device handles (as ints), once registered


def _ggml() -> Any:
    """libggml with the prototypes this module uses (declared once)."""
    global _lib
    if _lib is not None:
        return _lib
    import llama_cpp
    from llama_cpp import _ggml

    llama_cpp.llama_backend_init()
    lib = _ggml.libggml
    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    protos: dict[str, tuple[list[Any], Any]] = {
        "ggml_backend_dev_count": ([], sz),
        "ggml_backend_dev_get": ([sz], vp),
        "ggml_backend_dev_name": ([vp], ctypes.c_char_p),
        "ggml_backend_dev_description": ([vp], ctypes.c_char_p),
        "ggml_backend_dev_type": ([vp], ctypes.c_int),
        "ggml_backend_dev_memory": ([vp, ctypes.POINTER(sz), ctypes.POINTER(sz)], None),
        "ggml_backend_dev_by_type": ([ctypes.c_int], vp),
        "ggml_backend_reg_by_name": ([ctypes.c_char_p], vp),
        "ggml_backend_reg_get_proc_address": ([vp, ctypes.c_char_p], vp),
        "ggml_backend_reg_dev_count": ([vp], sz),
        "ggml_backend_reg_dev_get": ([vp, sz], vp),
        "ggml_backend_register": ([vp], None),
    }
    for name, (argtypes, restype) in protos.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = argtypes, restype
    _lib = lib
    return lib


def supports_rpc() -> bool:
    """Whether the installed llama.cpp was built with the RPC backend (-DGGML_RPC=on)."""
    import llama_cpp

    return bool(llama_cpp.llama_supports_rpc())


@dataclass(frozen=True)
class Device:
    handle: int
    name: str
    description: str
    kind: int
    free: int
    total: int


def _device(handle: int) -> Device:
    lib = _ggml()
    free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
    lib.ggml_backend_dev_memory(handle, ctypes.byref(free), ctypes.byref(total))
    return Device(
        handle=handle,
        name=(lib.ggml_backend_dev_name(handle) or b"").decode("utf-8", "replace"),
        description=(lib.ggml_backend_dev_description(handle) or b"").decode("utf-8", "replace"),
        kind=int(lib.ggml_backend_dev_type(handle)),
        free=int(free.value),
        total=int(total.value),
    )


def all_devices() -> list[Device]:
    lib = _ggml()
    return [_device(int(lib.ggml_backend_dev_get(i))) for i in range(int(lib.ggml_backend_dev_count()))]


def _rpc_handles() -> set[int]:
    return {h for handles in _added.values() for h in handles}


def workers_registered() -> bool:
    return bool(_added)


def local_accelerators() -> list[Device]:
    """This machine's GPUs (dedicated or integrated): what a local model offloads to."""
    remote = _rpc_handles()
    return [d for d in all_devices() if d.kind in (DEV_GPU, DEV_IGPU) and d.handle not in remote]


def has_local_accelerator() -> bool:
    return bool(local_accelerators())


def add_worker(endpoint: Endpoint) -> list[Device]:
    """Register a worker's devices with ggml (once per process); ModelLoadError with a sentence on failure."""
    with _lock:
        if endpoint in _added:
            return [_device(h) for h in _added[endpoint]]
        if not supports_rpc():
            raise ModelLoadError(RPC_MISSING)
        result = probe(endpoint)
        if not result.ok:
            raise ModelLoadError(result.sentence())
        lib = _ggml()
        reg = lib.ggml_backend_reg_by_name(b"RPC")
        fn_ptr = lib.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_rpc_add_server") if reg else None
        if not fn_ptr:
            raise ModelLoadError(RPC_MISSING)
        add_server = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p)(fn_ptr)
        worker_reg = add_server(str(endpoint).encode())
        if not worker_reg:
            raise ModelLoadError(f"The worker {endpoint} could not be added.")
        lib.ggml_backend_register(worker_reg)
        handles = [int(lib.ggml_backend_reg_dev_get(worker_reg, i))
                   for i in range(int(lib.ggml_backend_reg_dev_count(worker_reg)))]
        _added[endpoint] = handles
        devices = [_device(h) for h in handles]
        for d in devices:
            log.info("worker %s: %s (%s), %d MiB free", endpoint, d.name, d.description, d.free >> 20)
        return devices


def device_array(devices: list[Device]) -> Any:
    """A NULL-terminated ``ggml_backend_dev_t[]`` for llama_model_params.devices (keep it alive)."""
    arr = (ctypes.c_void_p * (len(devices) + 1))()
    for i, d in enumerate(devices):
        arr[i] = d.handle
    arr[len(devices)] = None
    return arr


def start_server(host: str, port: int, threads: int, cache_dir: str | None) -> None:
    """Serve this machine's best device to RPC clients; blocks for the life of the process.

    Uses the accelerators if there are any, else the CPU, as llama.cpp's rpc-server does.
    """
    if not supports_rpc():
        raise ModelLoadError(RPC_MISSING)
    lib = _ggml()
    chosen = [d for d in all_devices() if d.kind not in (DEV_CPU, DEV_ACCEL, DEV_META)]
    if not chosen:
        cpu = lib.ggml_backend_dev_by_type(DEV_CPU)
        if not cpu:
            raise ModelLoadError("No device to serve was found.")
        chosen = [_device(int(cpu))]
    reg = lib.ggml_backend_reg_by_name(b"RPC")
    fn_ptr = lib.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_rpc_start_server") if reg else None
    if not fn_ptr:
        raise ModelLoadError(RPC_MISSING)
    start = ctypes.CFUNCTYPE(
        None, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p
    )(fn_ptr)
    endpoint = str(Endpoint(host, port)).encode()
    arr = device_array(chosen)
    cache = cache_dir.encode() if cache_dir else None
    start(endpoint, cache, threads, len(chosen), ctypes.cast(arr, ctypes.c_void_p))
