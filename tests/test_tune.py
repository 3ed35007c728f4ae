"""`groove tune`: the grid, the split, the verdict, and the groove.toml edit."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from groove_core.cli import build_cli
from groove_core.config import GrooveConfig
from groove_core.evaluation.tomledit import TomlEditError, set_table_values
from groove_core.evaluation.tune import GRID_K, GRID_WORD, Point, current_point, grid, split
from groove_core.testing import make_kb, open_kb

PAIRS = 48
# Lexical leg only, so that the bm25 column weights decide the ranking on their own.
LEXICAL = '[embedder]\nname = "hashing"\n\n[plugins]\ndisabled = ["vector"]  # keep\n'


def _tune(kb: Path, *args: str) -> Result:
    result = CliRunner().invoke(build_cli(None), ["tune", "--kb", str(kb), *args])
    assert "Traceback" not in result.output
    return result


@pytest.fixture(scope="module")
def trap_kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Each code word is the front-matter title of a decoy page (so only its context column
    holds it) and sits in the body of the answer: the default weights rank the short decoy
    first; context = 0 fixes it."""
    files, golden = {}, []
    for i in range(PAIRS):
        word = f"kiwi{i:03d}"
        files[f"answer/{i}.md"] = f"# Page {i}\n\nThe code word {word} is explained here.\n"
        files[f"decoy/{i}.md"] = f"---\ntitle: {word}\n---\n\nSomething else, about weather.\n"
        golden.append({"query": word, "expected": [f"answer/{i}.md"], "id": f"q{i}"})
    kb = make_kb(tmp_path_factory.mktemp("trap") / "kb", files, config=LEXICAL)
    (kb / "golden.jsonl").write_text("\n".join(json.dumps(g) for g in golden) + "\n")
    open_kb(kb).close()
    return kb


def test_grid_fixes_content_weight_and_keeps_the_current_point() -> None:
    current = current_point(GrooveConfig(), "word")
    assert current == Point(60.0, 2.0, 1.0, 1.0)
    points = grid(current)
    assert current in points and len(points) == len(set(points))
    assert {p.rrf_k for p in points} == set(GRID_K)
    odd = Point(33.0, 2.0, 1.0, 3.0)
    # The k x column plane fixes content at 1; the fusion-weight sweep keeps the current
    # k and column weights and varies only the word weight and the rules' factors.
    plane = [p for p in grid(odd) if p.fusion_weights == odd.fusion_weights and p != odd]
    assert odd in grid(odd) and all(p.content == 1.0 for p in plane)
    sweep = [p for p in grid(odd) if p.fusion_weights != odd.fusion_weights]
    assert sweep and all((p.rrf_k, *p.weights) == (33.0, 2.0, 1.0, 3.0) for p in sweep)
    assert {p.word for p in sweep} == set(GRID_WORD)


def test_split_is_deterministic_and_stable_when_queries_are_added() -> None:
    keys = [f"q{i}" for i in range(200)]
    tune, held = split(keys, 0.5)
    assert split(keys, 0.5) == (tune, held)
    assert sorted(tune + held) == list(range(200))
    assert 70 < len(held) < 130
    more_tune, more_held = split([*keys, "new1", "new2"], 0.5)
    assert set(held) <= set(more_held) and set(tune) <= set(more_tune)


def test_tune_finds_a_real_gain_and_writes_only_search_fusion(trap_kb: Path) -> None:
    result = _tune(trap_kb, "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["best"]["context"] == 0.0
    assert payload["recommend"] is True and payload["comparison"]["significant"] is True
    assert payload["held_out"]["best"]["mean"] == 1.0
    assert payload["tune_queries"] + payload["held_out_queries"] == PAIRS
    assert (trap_kb / "groove.toml").read_text() == LEXICAL  # never written unasked

    written = _tune(trap_kb, "--write")
    assert written.exit_code == 0, written.output
    assert "beats the current setting" in written.output
    text = (trap_kb / "groove.toml").read_text()
    assert text.startswith(LEXICAL)  # the rest of the file, comment included, is untouched
    fusion = tomllib.loads(text)["search"]["fusion"]
    assert (fusion["context"], fusion["content"]) == (0.0, 1.0)


def test_tune_says_so_when_the_knobs_do_not_matter(tmp_path: Path) -> None:
    files = {
        f"n/{i}.md": f"# Note {i}\n\nUnique marker zq{i:03d}x in the body.\n" for i in range(30)
    }
    kb = make_kb(tmp_path / "kb", files)
    golden = [{"query": f"zq{i:03d}x", "expected": [f"n/{i}.md"]} for i in range(30)]
    (kb / "golden.jsonl").write_text("\n".join(json.dumps(g) for g in golden))
    open_kb(kb).close()
    before = (kb / "groove.toml").read_text()
    result = _tune(kb, "--write", "--report", str(tmp_path / "tune.html"))
    assert result.exit_code == 0, result.output
    assert "already the best" in result.output or "do not move quality" in result.output
    assert "not writing groove.toml" in result.output
    assert (kb / "groove.toml").read_text() == before
    page = (tmp_path / "tune.html").read_text()
    current = Point(60.0, 2.0, 1.0, 1.0)
    # the default fuses scores: k weighs no built-in leg, so only the configured one is tried
    plane = [p for p in grid(current, (60.0,)) if p.fusion_weights == current.fusion_weights]
    assert page.count("<rect") > len(plane)  # the k x column heatmap + bars


def test_toml_edit_keeps_comments_and_other_tables() -> None:
    text = (
        '# my settings\n[embedder]\nname = "hashing"\n\n'
        "[search.fusion]\nrrf_k = 60.0  # why 60\ncandidates = 40\n\n"
        "[index]\nmax_chunk_tokens = 300\n"
    )
    out = set_table_values(text, "search.fusion", {"rrf_k": 20.0, "heading": 1.0})
    assert "rrf_k = 20.0  # why 60\n" in out
    assert out.startswith('# my settings\n[embedder]\nname = "hashing"\n')
    assert out.endswith("[index]\nmax_chunk_tokens = 300\n")
    data = tomllib.loads(out)
    assert data["search"]["fusion"] == {"rrf_k": 20.0, "candidates": 40, "heading": 1.0}


def test_toml_edit_of_a_line_of_blanks_costs_as_much_as_a_plain_one() -> None:
    # a lazy value beside the blanks before a comment was quadratic in a line's blanks
    # (16,000 of them: 0.4 s); `groove tune --write` edits the user's own file
    from groove_core.testing import cost_ratio

    wide = '[search.fusion]\nrrf_k = 60.0  # why\nnote = "a' + " " * 20_000 + 'b"\n'
    plain = "[search.fusion]\nrrf_k = 60.0  # why\n" + "# note\n" * 2_000
    assert set_table_values(wide, "search.fusion", {"rrf_k": 1.0}) == wide.replace("60.0", "1.0")
    ratio = cost_ratio(
        lambda: set_table_values(wide, "search.fusion", {"rrf_k": 1.0}),
        lambda: set_table_values(plain, "search.fusion", {"rrf_k": 1.0}),
        rounds=3,
        repeat=1,
    )
    assert ratio < 10, ratio


def test_toml_edit_appends_the_table_and_refuses_unsafe_layouts() -> None:
    out = set_table_values('[embedder]\nname = "x"', "search.fusion", {"rrf_k": 10.0})
    assert out == '[embedder]\nname = "x"\n\n[search.fusion]\nrrf_k = 10.0\n'
    assert set_table_values("", "search.fusion", {"rrf_k": 1.0}) == "[search.fusion]\nrrf_k = 1.0\n"
    with pytest.raises(TomlEditError, match="inline or with dotted keys"):
        set_table_values("[search]\nfusion = { rrf_k = 3.0 }\n", "search.fusion", {"rrf_k": 1.0})
    with pytest.raises(TomlEditError, match="not valid TOML"):
        set_table_values("[search\n", "search.fusion", {"rrf_k": 1.0})


def test_k_is_swept_only_where_it_weighs_something() -> None:
    from groove_core.context import LegSpec
    from groove_core.evaluation.tune import k_values

    def nothing(_ctx: object) -> None:
        return None

    scaled = [LegSpec("word", "lexical", nothing, score="bm25"), LegSpec("v", "vector", nothing)]
    ranked = [*scaled, LegSpec("title", "lexical", nothing)]
    scores = GrooveConfig()
    assert scores.search.fusion.method == "scores"
    assert k_values(scores, scaled) == (60.0,)
    assert k_values(scores, ranked) == GRID_K
    rrf = GrooveConfig.model_validate({"search": {"fusion": {"method": "rrf"}}})
    assert k_values(rrf, scaled) == GRID_K
    assert {p.rrf_k for p in grid(current_point(scores, "word"), (60.0,))} == {60.0}
