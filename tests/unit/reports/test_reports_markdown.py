"""Reports render as markdown means them to: every golden report, parsed with a maintained
CommonMark parser (markdown-it-py, GFM tables and strikethrough on), keeps its tables
(every row as many cells as its header), its links, and holds no raw HTML; and the
escaping helpers (reports.markup) round-trip any text exactly.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token

from faultkit.rundir import GateResult
from reports import render_gate
from reports.markup import code, code_text, link, text
from reports.text import redact
from tests.unit.reports_helpers import GOLDEN

#: GitHub-flavoured enough for what reports use: tables and ~~strikethrough~~
MD = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
GOLDENS = sorted(GOLDEN.glob("*.md"))
#: a link (not an image) in markdown source: ``[label](target)``, label escapes allowed
_LINK = re.compile(r"(?<![\\!])\[(?:[^\]\\]|\\.)*\]\(([^)\s]+)\)")


def tokens(md: str) -> list[Token]:
    """Block tokens, with every inline token's children appended after it."""
    out: list[Token] = []
    for tok in MD.parse(md):
        out.append(tok)
        out.extend(tok.children or [])
    return out


def table_shapes(md: str) -> list[list[int]]:
    """Per table, the number of cells of each row (header row first), as parsed."""
    shapes: list[list[int]] = []
    cells = 0
    for tok in MD.parse(md):
        if tok.type == "table_open":
            shapes.append([])
        elif tok.type == "tr_open":
            cells = 0
        elif tok.type in ("th_open", "td_open"):
            cells += 1
        elif tok.type == "tr_close":
            shapes[-1].append(cells)
    return shapes


def source_tables(md: str) -> list[list[int]]:
    """Per table in the markdown source, the number of cells of each row (delimiter row
    left out), counting unescaped pipes outside fenced code."""
    tables: list[list[int]] = []
    in_fence = False
    previous_was_row = False
    for line in md.splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
        is_row = not in_fence and line.startswith("|")
        if is_row and not re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", line):
            if not previous_was_row:
                tables.append([])
            tables[-1].append(len(re.findall(r"(?<!\\)\|", line)) - 1)
        previous_was_row = is_row
    return tables


def _outside_fences(md: str) -> str:
    """``md`` without its fenced code blocks (mermaid, the log excerpt)."""
    return re.sub(r"^(`{3,})[^\n]*\n.*?^\1$", "", md, flags=re.S | re.M)


def links(md: str) -> list[str]:
    """Every link target, as the parser resolved it."""
    return [str(t.attrs["href"]) for t in tokens(md) if t.type == "link_open"]


def html(md: str) -> list[str]:
    """Raw HTML the parser would pass through (none is allowed in a report)."""
    return [t.content for t in tokens(md) if t.type in ("html_inline", "html_block")]


# ------------------------------------------------------------------ golden reports


def test_there_are_golden_reports() -> None:
    assert len(GOLDENS) >= 6


@pytest.mark.parametrize("golden", GOLDENS, ids=lambda p: p.name)
def test_tables_survive_rendering(golden: Path) -> None:
    md = golden.read_text(encoding="utf-8")
    shapes = table_shapes(md)
    assert len(shapes) >= 6  # the Run, figures, timeline, symptoms and telemetry tables
    for rows in shapes:
        assert len(set(rows)) == 1, f"ragged table: {rows}"
    # no row was lost to, or swallowed by, a neighbouring block
    assert shapes == source_tables(md)


@pytest.mark.parametrize("golden", GOLDENS, ids=lambda p: p.name)
def test_links_survive_rendering(golden: Path) -> None:
    md = golden.read_text(encoding="utf-8")
    found = links(md)
    assert found == _LINK.findall(_outside_fences(md))
    assert "./" in found and "measurement.json" in found
    assert all(not re.match(r"[a-z]+:", href) for href in found), "links must be relative"
    images = [t.attrs["src"] for t in tokens(md) if t.type == "image"]
    assert images == ["timeline.png"]


@pytest.mark.parametrize("golden", GOLDENS, ids=lambda p: p.name)
def test_no_raw_html_and_code_spans_are_clean(golden: Path) -> None:
    md = golden.read_text(encoding="utf-8")
    assert html(md) == []
    spans = [t.content for t in tokens(md) if t.type == "code_inline"]
    assert spans, "identifiers, PromQL and JSON are code spans"
    assert not [s for s in spans if "\\|" in s or "&#" in s]
    fences = [t for t in MD.parse(md) if t.type == "fence"]
    assert "mermaid" not in [f.info for f in fences]  # one timeline: the table


def test_gate_summary_links_scenarios_relatively(tmp_path: Path) -> None:
    gate_dir = tmp_path / "gate-20260101T120000Z-sim-vllm-ctx"
    run = gate_dir / "runs" / "20260101T120001.000Z-kill-sim-vllm"
    run.mkdir(parents=True)
    (gate_dir / "junit.xml").write_text("<testsuites/>")
    shutil.copy(GOLDEN / "pass-kill.incident.md", run / "incident.md")
    data = {
        "node": "sim-vllm",
        "candidate": "ctx|32k",
        "decision": "fail",
        "why": "1 of 2 failed",
        "junit_xml": "/elsewhere/" + gate_dir.name + "/junit.xml",
        "scenarios": [
            {"name": "test_kill[sim-vllm]", "passed": True, "lost": 3,
             "run_dir": f"/somewhere/else/{run.name}"},
            {"name": "test_oom[sim-vllm]", "passed": False, "run_dir": "runs/gone"},
        ],
    }
    md = render_gate(GateResult.from_json(data), gate_dir / "gate.md").read_text()
    assert html(md) == []
    assert links(md) == [
        "junit.xml",
        f"runs/{run.name}/incident.md",
        f"runs/{run.name}/",
    ]
    assert "`runs/gone` (not found)" in md
    for rows in table_shapes(md):
        assert len(set(rows)) == 1


# ------------------------------------------------------------------ escaping helpers


def _plain(value: str, max_len: int = 10_000) -> str:
    """What a reader must see: the text redacted, on one line."""
    return " ".join(redact(value).split())[:max_len]


def _cell_children(md: str) -> list[Token]:
    """The inline children of the first body cell of a one-row table."""
    parsed = MD.parse(md)
    td = next(i for i, t in enumerate(parsed) if t.type == "td_open")
    return list(parsed[td + 1].children or [])


def _visible(children: list[Token]) -> str:
    return "".join(t.content for t in children if t.type in ("text", "code_inline"))


#: any text, weighted towards what markdown gives meaning to
SURROGATES: tuple[Literal["Cs"]] = ("Cs",)
texts = st.text(
    alphabet=st.characters(blacklist_categories=SURROGATES)
    | st.sampled_from(list("|`*_~$<>&;#[]()\\!:-+=.1 \n")),
    max_size=60,
)


@given(texts)
def test_text_reads_back_exactly_in_a_table_cell(value: str) -> None:
    md = f"| a | b |\n|---|---|\n| {text(value, 10_000)} | x |\n"
    assert table_shapes(md) == [[2, 2]]
    children = _cell_children(md)
    assert {t.type for t in children} <= {"text"}, children
    assert _visible(children) == _plain(value)


@given(texts)
def test_text_reads_back_exactly_as_a_list_item_and_a_paragraph(value: str) -> None:
    for md in (f"- {text(value, 10_000)}\n", f"{text(value, 10_000)}\n"):
        parsed = MD.parse(md)
        inline = [t for t in parsed if t.type == "inline"]
        blocks = [t.type for t in parsed if t.type.endswith("_open")]
        assert blocks in (["bullet_list_open", "list_item_open", "paragraph_open"],
                          ["paragraph_open"], ["bullet_list_open", "list_item_open"], [])
        children = inline[0].children if inline else []
        assert {t.type for t in children or []} <= {"text"}, children
        assert _visible(list(children or [])) == _plain(value)


@given(texts)
def test_code_is_one_code_span_with_the_text(value: str) -> None:
    if not _plain(value):
        assert code(value) == ""
        return
    children = _cell_children(f"| a | b |\n|---|---|\n| {code(value, 10_000)} | x |\n")
    assert [t.type for t in children] == ["code_inline"]
    assert children[0].content == _plain(value)
    outside = [t for t in tokens(code_text(value, 10_000) + "\n") if t.type == "code_inline"]
    assert [t.content for t in outside] == [_plain(value)]


def test_text_leaves_ordinary_text_alone() -> None:
    for plain in (
        "bad_input",
        "20261130T132827.555Z-bad_input-llama",
        "Cannot connect to host 127.0.0.1:18001 [Connection refused]",
        "lost 161 > 50",
        "a < b & c",
        "restart_count 0 → 1 (1 restart(s) seen)",
    ):
        assert text(plain) == plain
    assert text("x|y `z` *a* _b_ <i>") == "x\\|y \\`z\\` \\*a\\* \\_b\\_ &lt;i>"
    assert text("[a](http://e)") == "[a\\](http://e)"
    assert text("# not a heading") == "\\# not a heading"
    assert code("a`b|c") == "``a`b\\|c``"


def test_link_encodes_its_target_and_escapes_its_label() -> None:
    assert link("run [1]", "runs/a b(1)/incident.md") == (
        "[run [1]](runs/a%20b%281%29/incident.md)"
    )
    assert links(link("x", "a b/c.md") + "\n") == ["a%20b/c.md"]
