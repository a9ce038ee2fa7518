"""ctypes side of the Go bridge: the C signatures (declared once, in SIGNATURES), status codes,
and `Handle`, the owner of one Go object.

Conventions of every exported function (go/exports.go): it returns a status int (0 = ok) and
takes as its last argument a `char **err` that receives a malloc'd message on failure, freed
here with `henn_free`. Objects are `runtime/cgo.Handle` integers (uintptr_t), released with
`henn_release` by a `weakref.finalize` when their Python wrapper dies, or explicitly.

`ctypes.CDLL` releases the GIL during each foreign call, so Python threads run Lattigo in
parallel. A Go runtime cannot be loaded twice in one process: the library is loaded once and
kept (a rebuilt library is picked up by the next process). Do not fork a process that has
loaded it (use the "spawn" start method of multiprocessing).
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
import weakref
from ctypes import POINTER, byref, c_char_p, c_double, c_int, c_int64, c_size_t, c_uint64, c_void_p
from pathlib import Path

from henn.errors import BackendError, InputError, SerializationError

log = logging.getLogger(__name__)

# Status codes (go/core.go)
OK, ERROR, PANIC, BAD_HANDLE, BAD_DATA = 0, 1, 2, 3, 4

H = c_size_t  # uintptr_t: a handle
OUT_H = POINTER(H)
HANDLES = POINTER(H)  # an array of handles (inputs)
DOUBLES = POINTER(c_double)
INT64S = POINTER(c_int64)
INTS = POINTER(c_int)
UINT64S = POINTER(c_uint64)
ERR = POINTER(c_void_p)  # char **err (kept as void* so that the pointer can be freed)

# name -> argument types (every function but henn_free returns int and ends with ERR)
SIGNATURES: dict[str, tuple] = {
    "henn_release": (H,),
    "henn_version": (POINTER(c_void_p),),
    "henn_seeded_keys": (POINTER(c_int),),
    "henn_selftest_panic": (),
    "henn_set_memory_policy": (c_int, c_int64),
    "henn_return_memory": (),
    "henn_context_new": (c_int, c_int, INT64S, c_int, INT64S, c_int, UINT64S, UINT64S, c_int, OUT_H, UINT64S, UINT64S),
    "henn_keygen_secret": (H, OUT_H),
    "henn_secret_export": (H, H, POINTER(c_void_p), POINTER(c_size_t)),
    "henn_secret_import": (H, c_char_p, c_size_t, OUT_H),
    "henn_keygen_public": (H, H, OUT_H),
    "henn_keygen_relin": (H, H, OUT_H),
    "henn_keygen_galois": (H, H, INT64S, c_int, c_int, OUT_H),
    "henn_galois_missing": (H, H, INT64S, c_int, c_int, INT64S, POINTER(c_int)),
    "henn_encode": (H, DOUBLES, DOUBLES, c_int, c_int, c_double, OUT_H),
    "henn_decode": (H, H, DOUBLES, DOUBLES, c_int),
    "henn_encrypt": (H, H, H, OUT_H),
    "henn_encrypt_symmetric": (H, H, H, OUT_H),
    "henn_decrypt": (H, H, H, OUT_H),
    "henn_add": (H, H, H, OUT_H),
    "henn_sub": (H, H, H, OUT_H),
    "henn_add_plain": (H, H, H, OUT_H),
    "henn_sub_plain": (H, H, H, OUT_H),
    "henn_mul_plain": (H, H, H, OUT_H),
    "henn_negate": (H, H, OUT_H),
    "henn_mul": (H, H, H, H, OUT_H),
    "henn_square": (H, H, H, OUT_H),
    "henn_relinearize": (H, H, H, OUT_H),
    "henn_rescale": (H, H, OUT_H),
    "henn_drop_level": (H, H, c_int, OUT_H),
    "henn_rotate": (H, H, c_int64, H, OUT_H),
    "henn_rotate_hoisted": (H, H, INT64S, c_int, H, OUT_H),
    "henn_rotate_sum_new": (H, H, OUT_H),
    "henn_rotate_sum_add": (H, H, H, c_int64),
    "henn_rotate_sum_result": (H, H, OUT_H),
    "henn_conjugate": (H, H, H, OUT_H),
    "henn_add_scalar": (H, H, c_double, c_double, OUT_H),
    "henn_mul_scalar": (H, H, c_double, c_double, c_double, OUT_H),
    "henn_linear_combination": (H, HANDLES, DOUBLES, c_int, c_int, c_double, OUT_H),
    "henn_linear_combinations": (H, HANDLES, c_int, DOUBLES, c_int, c_int, c_double, OUT_H),
    "henn_dot_encode_parts": (
        H,
        HANDLES,
        c_int,
        INT64S,
        INT64S,
        c_int,
        INT64S,
        c_int,
        DOUBLES,
        c_int,
        c_int,
        c_int,
        c_double,
        OUT_H,
    ),
    "henn_dot_plain": (H, HANDLES, HANDLES, c_int, OUT_H),
    "henn_dot_encode": (H, HANDLES, DOUBLES, c_int, c_int, c_int, c_double, OUT_H),
    "henn_metadata": (H, POINTER(c_int), DOUBLES, DOUBLES, POINTER(c_int)),
    "henn_marshal": (H, POINTER(c_void_p), POINTER(c_size_t)),
    "henn_unmarshal": (H, c_int, c_void_p, c_size_t, c_int, c_int, OUT_H),
    "henn_enable_bootstrapping": (H, c_char_p, POINTER(c_void_p)),
    "henn_keygen_bootstrap": (H, H, OUT_H),
    "henn_bootstrap_key_bytes": (H, H, INT64S),
    "henn_bootstrap_keep_dft": (H, H, c_int64, INT64S, INT64S),
    "henn_bootstrap": (H, H, H, c_double, c_int, OUT_H),
    "henn_kind": (H, POINTER(c_int)),
    "henn_wire_meta_size": (POINTER(c_int),),
    "henn_marshal_ciphertext": (H, H, c_int, POINTER(c_void_p), POINTER(c_size_t), POINTER(c_int)),
    "henn_unmarshal_ciphertext": (H, c_int, c_void_p, c_size_t, c_int, c_int, OUT_H),
    "henn_unmarshal_ciphertexts": (
        H,
        c_int,
        INTS,
        INTS,
        INTS,
        POINTER(c_void_p),
        POINTER(c_size_t),
        c_int,
        OUT_H,
        DOUBLES,
    ),
}

_load_lock = threading.Lock()
_loaded: dict[str, Bridge] = {}
GO_MEMORY_FRACTION = 0.7  # Go's soft heap limit, as a share of physical memory
GO_GC_PERCENT = 5
GO_GC_PERCENT_MOST = 100  # Go's default: where an evaluation needs little of the memory available


def gc_percent_for(need: int, available: int) -> int:
    """GOGC for an evaluation of `need` bytes (keys and ciphertexts): the heap may outgrow its live data by
    GOGC percent, so as much slack as keeps it within a quarter of the memory available (the weight
    plaintexts the executor caches come on top, sized to what is left), from GO_GC_PERCENT (ResNet-20: 13
    of 23 GiB) to Go's default (MNIST nets: < 1 GiB). At GOGC=5 a growing heap is collected every 5%: batch
    CryptoNets encrypted its 784 input ciphertexts in 2.2 s instead of 0.8 s."""
    room = available / 4 - need
    percent = int(100 * room / max(need, 1)) if room > 0 else 0
    return max(GO_GC_PERCENT, min(GO_GC_PERCENT_MOST, percent))


def _memory_policy() -> tuple[int, int]:
    """(GOGC, soft limit in bytes) for the bridge. Go's collector lets the heap grow to twice the live
    data by default: with gigabytes of keys and plaintexts (CIFAR at N = 2^15) that alone exhausts
    memory. GOGC=5 keeps the slack near 5% (measured: 1.78x live at the default, 1.05x at 5), cheap
    because the live data are pointer-free coefficient arrays; the soft limit makes the collector
    work harder near it. GOGC / GOMEMLIMIT set when the process started win (0 here: leave them)."""
    import psutil

    gc = 0 if "GOGC" in os.environ else GO_GC_PERCENT
    limit = 0 if "GOMEMLIMIT" in os.environ else int(psutil.virtual_memory().total * GO_MEMORY_FRACTION)
    return gc, limit


_bytes_from = ctypes.pythonapi.PyBytes_FromStringAndSize
_bytes_from.restype, _bytes_from.argtypes = ctypes.py_object, (c_void_p, ctypes.c_ssize_t)


# The settings Go reads when the library loads, each with the values it takes ("" = unset) and what they mean.
# HENN_LATTIGO_NTT lowers the vector kernels below the CPU's best (go/ntt_ifma.go: bridgeSIMD): "avx2" runs
# what a CPU without AVX-512 IFMA runs, "go" Lattigo's own code. HENN_PARALLEL_KEYSWITCH=0 runs each key
# switch on one goroutine (go/keyswitch.go), HENN_SEEDED_KEYS=0 makes full Galois keys (go/keygen.go).
BRIDGE_SETTINGS = {
    "HENN_LATTIGO_NTT": (
        ("", "avx2", "go"),
        "give 'avx2' (the AVX2 transform and no AVX-512 kernel) or 'go' (Lattigo's own code), or unset it for "
        "the best this CPU runs",
    ),
    "HENN_PARALLEL_KEYSWITCH": (
        ("", "0", "1"),
        "give 0 (each key switch on one goroutine, as Lattigo runs it) or 1, or unset it (two goroutines)",
    ),
    "HENN_SEEDED_KEYS": (("", "0", "1"), "give 0 (full Galois keys) or 1 (seeded keys, the default), or unset it"),
}


def _check_bridge_settings() -> None:
    """A mistyped setting is refused: Go reads anything else as the default, so a measurement meant for one
    configuration would silently run another."""
    for name, (values, hint) in BRIDGE_SETTINGS.items():
        value = os.environ.get(name, "")
        if value not in values:
            raise InputError(f"{name}={value!r}: {hint}")


class Bridge:
    """The loaded library with its signatures applied; `call` turns statuses into henn errors."""

    def __init__(self, path: Path):
        _check_bridge_settings()
        try:
            self.lib = ctypes.CDLL(str(path))
        except OSError as exc:
            raise BackendError(
                f"cannot load the Lattigo bridge {path} ({exc}): rebuild it with "
                "`python -m henn.ckks.backends.lattigo.build --force`"
            ) from None
        self.path = path
        self.loaded_mtime = path.stat().st_mtime
        for name, argtypes in SIGNATURES.items():
            try:
                fn = getattr(self.lib, name)
            except AttributeError:
                raise BackendError(
                    f"the Lattigo bridge {path} lacks {name}: it is out of date; rebuild it with "
                    "`python -m henn.ckks.backends.lattigo.build --force`"
                ) from None
            fn.argtypes, fn.restype = [*argtypes, ERR], c_int
        self.lib.henn_free.argtypes, self.lib.henn_free.restype = [c_void_p], None
        gc, limit = _memory_policy()
        if gc:
            self.call("henn_set_memory_policy", gc, limit)

    def call(self, name: str, *args) -> None:
        status, msg = self.call_status(name, *args)
        if status != OK:
            raise self._error(name, status, msg)

    def call_status(self, name: str, *args) -> tuple[int, str]:
        """(status, message) of a call, for callers that phrase the error themselves."""
        err = c_void_p()
        status = getattr(self.lib, name)(*args, byref(err))
        return status, (self.take_string(err) if status != OK else "")

    def take_string(self, ptr: c_void_p) -> str:
        """The C string at ptr, freed."""
        if not ptr.value:
            return ""
        try:
            return ctypes.string_at(ptr.value).decode("utf-8", "replace")
        finally:
            self.lib.henn_free(ptr)

    def take_bytes(self, ptr: c_void_p, n: int) -> bytes:
        """n bytes at ptr (a malloc'd buffer), copied once and freed: PyBytes_FromStringAndSize takes a
        Py_ssize_t, where ctypes.string_at takes a C int (objects of 2 GiB and more) and chunks joined
        would hold the bytes twice."""
        try:
            return _bytes_from(ptr.value, n) if n else b""
        finally:
            if ptr.value:
                self.lib.henn_free(ptr)

    def new(self, name: str, *args) -> Handle:
        """Call a function whose last output is one new handle; wrap it."""
        out = H()
        self.call(name, *args, byref(out))
        return Handle(self, out.value)

    def version(self) -> str:
        out = c_void_p()
        self.call("henn_version", byref(out))
        return self.take_string(out)

    def seeded_keys(self) -> bool:
        """Whether the bridge makes Galois and bootstrapping keys seeded (go/keygen.go: seededKeys)."""
        out = c_int()
        self.call("henn_seeded_keys", byref(out))
        return bool(out.value)

    @staticmethod
    def _error(name: str, status: int, msg: str) -> Exception:
        op = name.removeprefix("henn_")
        if status == BAD_DATA:
            return SerializationError(
                f"Lattigo could not load the data: {msg}; the payload is corrupted or comes from other parameters"
            )
        if status == BAD_HANDLE:
            return BackendError(
                f"lattigo {op}: {msg}; use values and keys only while the backend that made them is open"
            )
        if status == PANIC:
            return BackendError(f"lattigo {op}: {msg}; henn's checks should have prevented this, please report it")
        return BackendError(f"lattigo {op} failed: {msg}; henn's checks should have prevented this, please report it")


def _release(bridge: Bridge, value: int) -> None:
    err = c_void_p()
    if bridge.lib.henn_release(value, byref(err)) != OK:
        log.debug("release of handle %d: %s", value, bridge.take_string(err))


class Handle:
    """One Go object; freed when this wrapper is garbage-collected or `release()` is called."""

    __slots__ = ("value", "_finalizer", "__weakref__")

    def __init__(self, bridge: Bridge, value: int):
        self.value = value
        self._finalizer = weakref.finalize(self, _release, bridge, value)
        self._finalizer.atexit = False  # at exit the process memory goes anyway: no calls into Go

    def release(self) -> None:
        self._finalizer()

    @property
    def alive(self) -> bool:
        return self._finalizer.alive

    def __repr__(self) -> str:
        return f"<lattigo handle {self.value}{'' if self.alive else ' released'}>"


def load(path: Path) -> Bridge:
    """The bridge at `path`, loaded once per process."""
    key = str(Path(path).resolve())
    with _load_lock:
        if key not in _loaded:
            _loaded[key] = Bridge(Path(key))
            log.debug("loaded the Lattigo bridge %s", key)
        return _loaded[key]


def loaded() -> Bridge | None:
    """The bridge already loaded in this process, if any."""
    with _load_lock:
        return next(iter(_loaded.values()), None)
