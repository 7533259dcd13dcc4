"""Every file the repository's text points a reader at exists, and no text cites notes kept outside.

A threshold is only as good as its source, and a reader can check a source only if it can be
found: the figures' public sources live in docs/sources.md, and the policies, profiles and docs
point there by path and section. This test follows those pointers, and every other pointer to a
file of the repository, in what a reader reads: documentation, configuration, and the comments
and docstrings of code (string literals in code are data, such as a test's deliberately missing
file, and are not followed).

What counts as a pointer: a Markdown link's target, and any relative path with a directory part
that ends in a file extension below or in "/". A bare file name (``config.toml``, ``vllm.yaml``)
is not followed: it names the reader's own file as often as one of ours. A pointer resolves
against the directory of the file that holds it, then the repository root; with a ``#section``
into a Markdown file, that section must exist too.
"""

from __future__ import annotations

import io
import re
import subprocess
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Notes that were never part of the repository; the sources they held are in docs/sources.md.
# This file names them to forbid them, so it is the one file not searched for them.
OUTSIDE_NOTES = ("calibration.md", "facts/vllm", "../shared", "DESIGN.md")

PROSE_SUFFIXES = {".md", ".yaml", ".yml", ".toml", ".cfg", ".service", ".rules"}
TARGET_SUFFIX = r"(?:md|ya?ml|py|toml|cfg|service|json|txt|csv)"
COMPONENT = r"[\w*][\w.*-]*"
# A file with a directory part, or a folder of at least two levels: a lone "word/" is as often
# an MQTT topic prefix or a folder inside a generated environment as one of the repository.
# Not after a word, a dot, a slash, "~" or "$": a path inside an absolute path, a home path or
# a variable ($OUT/x.json) is not a path of the repository.
FILE = rf"(?:{COMPONENT}/)+{COMPONENT}\.{TARGET_SUFFIX}"
FOLDER = rf"(?:{COMPONENT}/){{2,}}"
PATH = re.compile(rf"(?<![\w./~$-])((?:\.\.?/)*(?:{FILE}|{FOLDER}))(?![\w*/-])(#[\w-]+)?")
LINK = re.compile(r"\]\(([^)\s]+)\)")
# A link to a URL, text and all: its text names the remote file, not one of ours.
URL = re.compile(r"\[[^\]]*\]\(\w+://[^)]*\)|\w+://\S+")

# Paths shown as they are written inside a file of another directory (a policy test's
# `policies:` line, a schema modeline at the top of a policy): resolved from that directory.
WRITTEN_IN = {
    "../kv-thrash.yaml": "policies/tests",
    "../docs/schemas/policy.schema.json": "policies",
    "../../docs/schemas/policy-test.schema.json": "policies/tests",
}
# Where the wheel carries files of the repository's root (pyproject.toml's force-include).
SHIPPED_IN_WHEEL = "daemon/shipped/"
# vLLM's own source tree, cited by path (docs/sources.md says which release).
FOREIGN_ROOTS = ("vllm/",)
# Paths in examples that stand for any path: under a name in capitals (STATE_DIR/freeze.x/),
# or a file named x (policies/tests/x.test.yaml).
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*/|(?:^|/)x\.")
STATEMENT_START = (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)


def repository_files() -> list[str]:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the repository's file list comes from git")
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
        text=True,
    ).stdout
    # --cached still lists a file deleted in the working tree; it is not there to point at.
    return sorted(name for name in listed.split("\0") if name and (ROOT / name).is_file())


def read_text(name: str) -> str | None:
    try:
        return (ROOT / name).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None


def python_prose(source: str) -> Iterator[tuple[int, str]]:
    """The comments and docstrings of a module, as (line number, line).

    A docstring is a string that starts a statement; every other string is data.
    """
    if not references(source):
        return  # most modules point at nothing: spare them the (slow, pure Python) tokenizer
    previous = tokenize.NEWLINE
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
        elif token.type == tokenize.STRING and previous in STATEMENT_START:
            for offset, line in enumerate(token.string.splitlines()):
                yield token.start[0] + offset, line
        if token.type not in (tokenize.NL, tokenize.COMMENT):
            previous = token.type


def prose_lines(name: str, text: str) -> Iterator[tuple[int, str]]:
    if name.endswith(".py"):
        yield from python_prose(text)
    elif Path(name).suffix in PROSE_SUFFIXES or name.startswith(("examples/", "systemd/")):
        yield from enumerate(text.splitlines(), start=1)


def references(line: str) -> list[str]:
    without_urls = URL.sub(" ", line)
    links = [link for link in LINK.findall(without_urls) if not link.startswith(("#", "mailto:"))]
    paths = [match.group(1) + (match.group(2) or "") for match in PATH.finditer(without_urls)]
    return list(dict.fromkeys(links + paths))  # a link's target is also a path: report it once


def heading_anchors(markdown: str) -> set[str]:
    # GitHub's rule: lower case, punctuation other than "-" and "_" dropped, spaces to "-".
    return {
        re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        for heading in re.findall(r"^#{1,6} (.+)$", markdown, flags=re.MULTILINE)
    }


def resolves(reference: str, holder: str) -> bool:
    path, _, section = reference.partition("#")
    if path.startswith(FOREIGN_ROOTS) or PLACEHOLDER.search(path):
        return True
    if path.startswith(SHIPPED_IN_WHEEL) and not (ROOT / path).exists():
        path = path.removeprefix(SHIPPED_IN_WHEEL)
    bases: tuple[Path, ...] = ((ROOT / holder).parent, ROOT)
    if path in WRITTEN_IN:
        bases = (ROOT / WRITTEN_IN[path],)
    for base in bases:
        matches = list(base.glob(path)) if "*" in path else [base / path]
        found = [match for match in matches if match.exists()]
        if found:
            target = found[0]
            return not section or (
                target.suffix == ".md" and section in heading_anchors(target.read_text())
            )
    return False


def test_every_file_the_repository_points_at_exists() -> None:
    broken: list[str] = []
    for name in repository_files():
        text = read_text(name)
        if text is None:
            continue
        for number, line in prose_lines(name, text):
            broken.extend(
                f"{name}:{number}: {reference}"
                for reference in references(line)
                if not resolves(reference, name)
            )
    assert broken == []


def test_nothing_cites_notes_kept_outside_the_repository() -> None:
    this_file = Path(__file__).resolve().relative_to(ROOT).as_posix()
    cited = [
        f"{name}:{number}: {note}"
        for name in repository_files()
        if name != this_file
        for number, line in enumerate((read_text(name) or "").splitlines(), start=1)
        for note in OUTSIDE_NOTES
        if note in line
    ]
    assert cited == []
