"""The documentation as a reference: its links resolve, the README lists every
``NNRT_*`` environment variable the code reads, and every benchmark script is
listed where benchmarks/README.md says it is."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CODE_DIRS = ("nnrt_core", "plugins", "schedulers", "tools")
_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.M)


def doc_files() -> list[Path]:
    """The Markdown files whose links are checked."""
    return sorted(ROOT.glob("docs/*.md")) + [ROOT / "README.md", ROOT / "benchmarks" / "README.md"]


def anchors(path: Path) -> set[str]:
    """GitHub's anchors of ``path``'s headings: lower case, punctuation dropped, spaces to
    hyphens, ``-1``, ``-2``... for repeated headings."""
    seen: dict[str, int] = {}
    out = set()
    for match in _HEADING.finditer(_FENCE.sub("", path.read_text(encoding="utf-8"))):
        slug = re.sub(r"[^\w\- ]", "", match.group(2).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def broken_links(path: Path) -> list[str]:
    """Relative links of ``path`` whose file or ``#anchor`` does not exist."""
    bad = []
    for link in _LINK.findall(_FENCE.sub("", path.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", link):
            continue
        target_path, _, anchor = link.partition("#")
        target = (path.parent / target_path).resolve() if target_path else path
        if not target.exists():
            bad.append(f"{link} (no such file)")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            bad.append(f"{link} (no such heading in {target.name})")
    return bad


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path):
    assert broken_links(path) == [], f"{path.relative_to(ROOT)}: broken links"


def test_anchor_rules_match_github():
    """The slug rules the link check relies on, on headings of the kinds the docs use."""
    sample = ROOT / "docs" / "performance.md"
    assert "where-the-targets-stand" in anchors(sample)
    runtime = anchors(ROOT / "docs" / "runtime.md")
    assert "fp16-overflow--scheduleconfigon_overflow" in runtime  # em dash and backticks dropped


def env_variables_read() -> set[str]:
    """Every ``NNRT_*`` name in the code of the core, the plugins, the schedulers and the tools."""
    names = set()
    for folder in CODE_DIRS:
        for path in (ROOT / folder).rglob("*.py"):
            names |= set(re.findall(r"NNRT_[A-Z0-9_]+", path.read_text(encoding="utf-8")))
    return names


def test_readme_lists_every_environment_variable():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `(NNRT_[A-Z0-9_]+)", readme, re.M))
    read = env_variables_read()
    assert read, "no NNRT_ variable found in the code: the scan is wrong"
    assert read - listed == set(), "read by the code, missing from the README's table"
    assert listed - read == set(), "in the README's table, no longer read by the code"


def test_readme_quick_start_is_two_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    assert len([line for line in block.splitlines() if line.strip()]) == 2


def test_every_benchmark_script_is_listed():
    """Scripts of benchmarks/ are named in performance.md (targets or scripts table) and in
    benchmarks/README.md; those of benchmarks/ab/ in benchmarks/README.md's ab section."""
    perf = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    readme = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    top, ab = readme.split("## `benchmarks/ab/`", 1)
    for script in sorted((ROOT / "benchmarks").glob("*.py")):
        assert f"`{script.name}" in perf, f"{script.name} is not named in docs/performance.md"
        assert f"`{script.name}" in top, f"{script.name} is not listed in benchmarks/README.md"
    for script in sorted((ROOT / "benchmarks" / "ab").glob("*.py")):
        assert f"`{script.name}`" in ab, f"ab/{script.name} is not listed in benchmarks/README.md"


def test_performance_page_opens_with_the_targets_table():
    """Every target on one line, in the page's first screen (its first 60 lines), each row short."""
    lines = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8").splitlines()
    start = lines.index("| target | status | figure | date | command (`python benchmarks/...`) |")
    assert start < 20
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    assert len(rows) >= 10 and start + 2 + len(rows) <= 60
    assert max(len(r) for r in rows) <= 300, "a targets row is paragraph-long"
