"""A clone of the repository stands alone: nothing points at files outside it.

The team's specifications live in docs/ and the published test data in tests/data/; a user's
clone has no ``../shared`` beside it.  These tests fail on any reference to such a folder and on
any relative Markdown link that does not resolve inside the repository.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Pointers at the team's folders outside the repository, in any spelling seen so far.
OUTSIDE = re.compile(r"(\.\./shared\b|\bshared/(specs|data)\b|(?<![\w./-])specs/[\w.-]+\.md)")
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)]*)?\)")
SUFFIXES = {".py", ".md", ".ipynb", ".json", ".cfg", ".toml", ".txt"}


def _tracked_text_files():
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
        files = [ROOT / f for f in out]
    except (OSError, subprocess.CalledProcessError):    # an export without .git
        files = [p for p in ROOT.rglob("*") if ".venv" not in p.parts]
    return [p for p in files if p.suffix in SUFFIXES and p.is_file()
            and p != Path(__file__).resolve()]


def test_no_reference_to_folders_outside_the_repository():
    bad = []
    for path in _tracked_text_files():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if OUTSIDE.search(line):
                bad.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert not bad, "references to files a clone does not contain:\n" + "\n".join(bad)


def test_relative_markdown_links_resolve():
    bad = []
    for path in _tracked_text_files():
        if path.suffix not in (".md", ".ipynb"):
            continue
        for target, _anchor in LINK.findall(path.read_text(encoding="utf-8")):
            if re.match(r"^[a-z]+:", target):          # http:, https:, mailto:
                continue
            if not (path.parent / target).exists():
                bad.append(f"{path.relative_to(ROOT)} -> {target}")
    assert not bad, "broken relative links:\n" + "\n".join(bad)


def test_published_cases_are_in_the_repository():
    data = ROOT / "tests" / "data" / "tensorcore-published-cases.json"
    assert data.is_file()
    assert "Fasi" in data.read_text(encoding="utf-8")[:400]   # the source is named


def test_the_checks_can_fail():
    assert OUTSIDE.search("see ../shared/specs/x.md")
    assert OUTSIDE.search("(specs/loss-scaling.md, 3)")
    assert not OUTSIDE.search("docs/loss-scaling.md")
    assert LINK.findall("[a](docs/missing.md)") == [("docs/missing.md", "")]
