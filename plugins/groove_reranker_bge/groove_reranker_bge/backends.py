"""Cross-encoder models: loaded lazily, once per process, behind one scoring interface.

Nothing here imports torch at module level: this module is imported with the plugin (on
every ``groove`` start), and torch + transformers take seconds to import. The libraries are
imported inside the loaders, when a rerank first runs.

Both backends return the model's raw logit per (query, passage) pair — no sigmoid — so the
``score`` of a reranked hit is the reranker's raw score (docs/retrieval-pipeline.md)
whichever library runs it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from groove_core.config import ConfigError

Backend = Literal["sentence-transformers", "flag", "http"]
Predict = Callable[[Sequence[tuple[str, str]]], list[float]]

#: Models kept loaded at once: a query-time ``--reranker`` (or an MCP caller) naming model
#: after model must not pile gigabytes of weights into a long-running server.
MAX_LOADED = 2

#: The plugin is not on PyPI: install it from a groove checkout (its root as current folder).
INSTALL_HINT = {
    "sentence-transformers": "pip install ./plugins/groove_reranker_bge torch==2.13.0",
    "flag": "pip install './plugins/groove_reranker_bge[flag]' torch==2.13.0",
    "http": "pip install ./plugins/groove_http_models",
}


class RerankerError(ConfigError):
    """A reranker model that cannot be loaded or run. A ConfigError, so that the CLI and the
    MCP server report it as one line naming the model (never a traceback)."""


@dataclass(frozen=True)
class ModelKey:
    """What makes two loaded models interchangeable (the cache key)."""

    model: str
    backend: Backend
    max_length: int
    device: str = "cpu"
    trust_remote_code: bool = False
    #: The ``http`` backend: the /rerank endpoint, its request style, the key's variable.
    url: str = ""
    api_style: str = "tei"
    api_key_env: str | None = None
    timeout: float = 60.0


@dataclass
class LoadedModel:
    """A model ready to score, and its last measured cost (the budget's first forecast)."""

    key: ModelKey
    predict: Predict
    ms_per_pair: float | None = None

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """One raw score per pair, in order."""
        return self.predict(pairs) if pairs else []


_loaded: OrderedDict[ModelKey, LoadedModel] = OrderedDict()
_lock = threading.Lock()  # the MCP server searches on worker threads: load each model once


def get_model(key: ModelKey) -> LoadedModel:
    """The loaded model for ``key``, loading it on first use (RerankerError if it cannot)."""
    with _lock:
        model = _loaded.get(key)
        if model is None:
            model = LoadedModel(key, _load(key))
            _loaded[key] = model
            while len(_loaded) > MAX_LOADED:
                _loaded.popitem(last=False)
        else:
            _loaded.move_to_end(key)
        return model


def loaded_keys() -> list[ModelKey]:
    """The models currently held, least recently used first."""
    with _lock:
        return list(_loaded)


def resolve_backend(requested: str) -> Backend:
    """``auto`` is sentence-transformers: always installed with this plugin, and for the BGE
    models it gives the same raw scores as FlagEmbedding (tests/test_reranker_backends.py)."""
    if requested in ("flag", "http"):
        return "flag" if requested == "flag" else "http"
    return "sentence-transformers"


# -- loading ----------------------------------------------------------------------------


def _load(key: ModelKey) -> Predict:
    if key.backend == "http":  # a model on a server: no directory, no hub, no torch
        return _checked(key, _http(key))
    local = _local_directory(key.model)
    if not local:
        _require_cached_when_offline(key)
    try:
        predict = _LOADERS[key.backend](key)
    except RerankerError:
        raise
    except Exception as err:  # the libraries raise many types for a model they cannot load
        raise RerankerError(_load_failure(key, err, local)) from None
    return _checked(key, predict)


def _local_directory(model: str) -> bool:
    """True for an existing local directory; False for a hub name. A name that can only be a
    path (``./m``, ``/m``, ``~/m``) but does not exist is an error here, not a hub lookup."""
    path = Path(model).expanduser()
    if path.is_dir():
        return True
    if path.exists():
        raise RerankerError(f"reranker model {model!r} is a file; give the model's directory")
    if model.startswith((".", "/", "~")) or path.is_absolute() or model.count("/") > 1:
        raise RerankerError(f"reranker model directory {model!r} does not exist")
    return False


def _require_cached_when_offline(key: ModelKey) -> None:
    """Offline, a hub name that is not in the cache fails here, in milliseconds, before
    torch is imported (seconds) — and never reaches the hub client's retries."""
    from huggingface_hub import constants, try_to_load_from_cache

    if not constants.HF_HUB_OFFLINE:  # also set by TRANSFORMERS_OFFLINE
        return
    try:
        cached = try_to_load_from_cache(key.model, "config.json")
    except Exception:  # not even a valid repository id (e.g. "a b"): certainly not cached
        cached = None
    if isinstance(cached, str):
        return
    raise RerankerError(
        f"reranker model {key.model!r} is not a local directory and not in the Hugging Face "
        "cache, and HF_HUB_OFFLINE is set: download it while online "
        f"(huggingface-cli download {key.model}) or give the path of a local copy"
    )


def _load_failure(key: ModelKey, err: Exception, local: bool) -> str:
    message = f"cannot load reranker model {key.model!r} with {key.backend}: {_first_line(err)}"
    if "trust_remote_code" in str(err):
        return (
            f"{message}. This model runs code from its own repository: allow it with "
            f'[plugin.reranker] trust_remote_code = ["{key.model}"]'
        )
    if local:
        return (
            f"{message}. The directory must hold a cross-encoder saved by transformers or "
            "sentence-transformers (config.json, weights, tokenizer files)"
        )
    return (
        f"{message}. Download it while online (huggingface-cli download {key.model}) or give "
        "the path of a local copy; offline (HF_HUB_OFFLINE=1) only models already in the "
        "Hugging Face cache load"
    )


def _first_line(err: Exception) -> str:
    """Library errors run to many lines (URLs, advice); the CLI shows one."""
    return (str(err).strip().splitlines() or [type(err).__name__])[0].rstrip(".")


def _checked(key: ModelKey, predict: Predict) -> Predict:
    """Name the model when scoring fails (e.g. ``max_length`` beyond what the model was
    built for), and refuse models with several output labels: a reranker has one logit."""

    def run(pairs: Sequence[tuple[str, str]]) -> list[float]:
        import numpy as np

        try:
            raw = predict(pairs)
        except Exception as err:
            raise RerankerError(
                f"reranker model {key.model!r} failed while scoring with {key.backend} "
                f"(max_length {key.max_length}): {_first_line(err)}"
            ) from None
        out = np.asarray(raw, dtype=np.float64).reshape(len(pairs), -1)
        if out.shape[1] != 1:
            raise RerankerError(
                f"reranker model {key.model!r} has {out.shape[1]} output labels; a "
                "cross-encoder reranker has exactly one (a relevance score)"
            )
        return [float(v) for v in out[:, 0]]

    return run


def _quiet_transformers(backend: Backend) -> None:
    # transformers 5 draws a "Loading weights" progress bar on stderr for every load: noise
    # in CLI output and MCP server logs.
    hf_logging = _import("transformers.utils.logging", backend)
    hf_logging.disable_progress_bar()


def _import(module: str, backend: Backend) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise RerankerError(
            f"the {backend} reranker backend cannot be imported ({err}); install it from a "
            f"groove checkout: {INSTALL_HINT[backend]}"
        ) from None


def _sentence_transformers(key: ModelKey) -> Predict:
    st = _import("sentence_transformers", "sentence-transformers")
    torch = _import("torch", "sentence-transformers")
    _quiet_transformers("sentence-transformers")
    model = st.CrossEncoder(
        key.model,
        device=key.device,
        max_length=key.max_length,
        trust_remote_code=key.trust_remote_code,
        # CrossEncoder applies a sigmoid to one-label models by default; the pipeline wants the
        # raw score (BGE logits, roughly -10..10).
        activation_fn=torch.nn.Identity(),
    )

    def predict(pairs: Sequence[tuple[str, str]]) -> list[float]:
        scores = model.predict(
            list(pairs), batch_size=len(pairs), show_progress_bar=False, convert_to_numpy=True
        )
        return list(scores)

    return predict


def _flag(key: ModelKey) -> Predict:
    """FlagEmbedding's FlagReranker loads the model; scoring follows its input preparation.

    FlagReranker.compute_score starts every call with a trial forward pass of the first
    batch (a guard against GPU out-of-memory) and throws the result away. The budget scores
    batch by batch, so that guard would double the CPU work (measured: 3.9 s instead of
    1.8 s for 50 pairs, MiniLM size). So the forward pass is run here, on FlagEmbedding's
    own inputs: the query cut to ``max_length * 3 // 4`` tokens, the passage cut to fit
    (``only_second``), the same helpers — the same scores as ``compute_score``
    (tests/test_reranker_backends.py), without the trial pass.
    """
    flag = _import("FlagEmbedding", "flag")
    torch = _import("torch", "flag")
    compat = _import("FlagEmbedding.utils.tokenizer_compat", "flag")
    _quiet_transformers("flag")
    reranker = flag.FlagReranker(
        key.model,
        use_fp16=False,
        devices=key.device,
        max_length=key.max_length,
        trust_remote_code=key.trust_remote_code,
        normalize=False,
    )
    tokenizer, model = reranker.tokenizer, reranker.model.to(key.device).eval()
    query_max_length = reranker.query_max_length or key.max_length * 3 // 4

    def predict(pairs: Sequence[tuple[str, str]]) -> list[float]:
        queries = tokenizer(
            [q for q, _ in pairs],
            add_special_tokens=False,
            max_length=query_max_length,
            truncation=True,
        )["input_ids"]
        passages = tokenizer(
            [p for _, p in pairs],
            add_special_tokens=False,
            max_length=key.max_length,
            truncation=True,
        )["input_ids"]
        items = [
            compat.prepare_for_model_compat(
                tokenizer, q, p, truncation="only_second", max_length=key.max_length, padding=False
            )
            for q, p in zip(queries, passages, strict=True)
        ]
        inputs = compat.pad_with_compat(tokenizer, items, padding=True, return_tensors="pt")
        with torch.no_grad():
            logits = model(**inputs.to(key.device), return_dict=True).logits
        return [float(v) for v in logits.view(-1).float().cpu()]

    return predict


def _http(key: ModelKey) -> Predict:
    """A /rerank server (TEI, Jina, Cohere-compatible, vLLM), through groove_http_models."""
    if not key.url:
        raise RerankerError(
            "[plugin.reranker] backend = 'http' needs url = the server's rerank endpoint "
            "(e.g. http://localhost:8080/rerank)"
        )
    rerank = _import("groove_http_models.rerank", "http")

    def predict(pairs: Sequence[tuple[str, str]]) -> list[float]:
        try:
            scores: list[float] = rerank.score(
                key.url,
                key.model,
                key.api_style,
                pairs,
                timeout=key.timeout,
                api_key_env=key.api_key_env,
            )
        except rerank.RerankServerError as err:
            raise RerankerError(str(err)) from None
        return scores

    return predict


_LOADERS: dict[Backend, Callable[[ModelKey], Predict]] = {
    "sentence-transformers": _sentence_transformers,
    "flag": _flag,
    "http": _http,
}
