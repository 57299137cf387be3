"""Shared helpers for the report tests: fixture copies and markdown structure checks."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

FIXTURES = Path(__file__).parents[1] / "fixtures"
RUNS = FIXTURES / "runs"
GOLDEN = FIXTURES / "golden"
FIXTURE_NAMES = ("pass-kill", "fail-oom", "not-detected", "failed-rollout")

_CELL_SPLIT = re.compile(r"(?<!\\)\|")


def copy_run(name: str, tmp_path: Path) -> Path:
    """A private copy of a fixture run directory (rendering writes into the directory)."""
    dst = tmp_path / name
    shutil.copytree(RUNS / name, dst)
    return dst


def cells(line: str) -> list[str]:
    """Cells of one markdown table row (escaped pipes ``\\|`` do not split)."""
    return [c.strip() for c in _CELL_SPLIT.split(line.strip())[1:-1]]


def table_problems(md: str) -> list[str]:
    """Rows whose cell count differs from their table's header; unbalanced code fences."""
    problems = []
    header: int | None = None
    in_fence: str | None = None
    for n, line in enumerate(md.splitlines(), 1):
        fence = re.match(r"^(`{3,}|~{3,})", line)
        if fence:
            marker = fence.group(1)
            if in_fence is None:
                in_fence = marker
            elif line.strip() == in_fence:
                in_fence = None
            continue
        if in_fence:
            continue
        if line.startswith("|"):
            count = len(cells(line))
            if header is None:
                header = count
            elif count != header:
                problems.append(f"line {n}: {count} cells, header has {header}: {line}")
        else:
            header = None
    if in_fence is not None:
        problems.append(f"unclosed fence {in_fence}")
    return problems


def section(md: str, title: str) -> str:
    """The text of ``## title`` up to the next ``## `` heading."""
    start = md.index(f"## {title}\n")
    end = md.find("\n## ", start + 1)
    return md[start : end if end != -1 else None]
