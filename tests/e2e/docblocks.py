"""The commands of the README and docs/, read from their fenced blocks, for `test_docs.py`.

The convention, which docs/dev/setup.md states for writers:

- commands are fenced ```sh, one a line (a trailing `\\` continues it), without prompts, comments
  allowed; they run as written, each in turn, with bash, and each must exit 0;
- what they print, where a doc shows it, is a ```text block right after (only blank lines between);
- every fence names its language (a block without one could be commands nobody runs);
- an HTML comment right before a block tells the test more (it renders as nothing):
  `<!-- docs-test: skip — REASON -->` on a ```sh block that cannot run against one local
  `tessera up` (a real cluster, a GPU, a node's systemd, `tessera up` itself, a long benchmark);
  `<!-- docs-test: exit N -->` on a ```sh block whose every command fails with N, as the doc shows;
  `<!-- docs-test: file NAME -->` on a block whose content is the file NAME that later commands of
  the same document use (written out before them).

Reading a document never fails: what breaks the convention is a `problem`, which the test lists.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Final

__all__ = ["Commands", "Document", "documents", "parse"]

SHELL: Final = "sh"
OUTPUT: Final = "text"
#: Tags of shell blocks in other conventions: the docs use one, so these are converted to `sh`.
_OTHER_SHELLS: Final = frozenset({"bash", "shell", "console", "shell-session", "zsh", "terminal"})
_FENCE: Final = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[^\s`]*)")
_MARKER: Final = re.compile(r"^<!--\s*docs-test:\s*(?P<body>.*?)\s*-->$")
_SKIP: Final = re.compile(r"^skip\s*(?:—|–|-|:)\s*(?P<reason>\S.*)$")
_EXIT: Final = re.compile(r"^exit\s+(?P<code>[1-9]\d*)$")
_FILE: Final = re.compile(r"^file\s+(?P<name>\S+)$")
_PROMPT: Final = re.compile(r"^\$\s")
_ORPHAN: Final = "a docs-test marker that no block follows (only blank lines may stand between)"


@dataclass(frozen=True, slots=True)
class Commands:
    """One ```sh block: what the test runs, or why it does not."""

    where: str  # "docs/user/up.md:194", the opening fence
    commands: tuple[str, ...]  # as written, continuation lines included; comment-only lines left out
    skip: str | None = None  # the marker's reason
    exit_code: int = 0
    output: str | None = None  # the ```text block right after
    files: tuple[tuple[str, str], ...] = ()  # (name, content) the document writes before this block


@dataclass(frozen=True, slots=True)
class Document:
    path: str  # relative to the repository root
    commands: tuple[Commands, ...] = ()
    problems: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Block:
    line: int  # 1-based, the opening fence
    lang: str
    text: str  # dedented by the fence's indentation
    marker: str | None  # the docs-test marker's body right before, if any
    follows: _Block | None = None  # the block right before, with only blank lines between


def documents(root: Path) -> list[Document]:
    """README.md and every docs/**/*.md, in that order (the order the test runs them in)."""
    paths = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    return [parse(path.relative_to(root).as_posix(), path.read_text(encoding="utf-8")) for path in paths]


def parse(path: str, markdown: str) -> Document:
    """The document's ```sh blocks as `Commands`, and every way it breaks the convention."""
    misplaced: list[tuple[int, str]] = []
    blocks = list(_blocks(markdown, misplaced))
    problems = [f"{path}:{line}: {problem}" for line, problem in misplaced]
    commands: list[Commands] = []
    files: list[tuple[str, str]] = []
    outputs = {
        b.follows.line: b
        for b in blocks
        if b.lang == OUTPUT and b.marker is None and b.follows is not None and b.follows.lang == SHELL
    }
    for block in blocks:
        where = f"{path}:{block.line}"
        problems += [f"{where}: {p}" for p in _block_problems(block)]
        name = _match(_FILE, block.marker, "name")
        if name is not None and block.lang != SHELL:
            files.append((name, block.text))
        if block.lang == SHELL:
            commands.append(_commands(where, block, outputs.get(block.line), tuple(files)))
    return Document(path, tuple(commands), tuple(problems))


def _blocks(markdown: str, problems: list[tuple[int, str]]) -> Iterator[_Block]:
    lines = markdown.splitlines()
    marker: tuple[int, str] | None = None
    previous: _Block | None = None  # the last block, while only blank lines follow it
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        fence = _FENCE.match(line)
        if fence is None:
            if found := _MARKER.match(stripped):
                if marker is not None:
                    problems.append((marker[0], _ORPHAN))
                marker = (i + 1, found["body"])
            elif stripped:
                if marker is not None:
                    problems.append((marker[0], _ORPHAN))
                marker, previous = None, None
            i += 1
            continue
        end = _closing(lines, i + 1, fence["fence"])
        if end is None:
            problems.append((i + 1, "a fence that is never closed"))
            return
        indent = len(fence["indent"])
        body = "\n".join(raw[indent:] if not raw[:indent].strip() else raw.lstrip() for raw in lines[i + 1 : end])
        previous = _Block(i + 1, fence["lang"].lower(), body, marker[1] if marker else None, previous)
        yield previous
        marker = None
        i = end + 1
    if marker is not None:
        problems.append((marker[0], _ORPHAN))


def _closing(lines: list[str], start: int, fence: str) -> int | None:
    for j in range(start, len(lines)):
        stripped = lines[j].strip()
        if stripped.startswith(fence) and not stripped.strip(fence[0]):
            return j
    return None


def _block_problems(block: _Block) -> list[str]:
    problems = []
    if not block.lang:
        problems.append("a block without a language: fence commands as ```sh, what they print as ```text")
    elif block.lang in _OTHER_SHELLS:
        problems.append(f"```{block.lang}: fence commands as ```sh (no prompts), what they print as ```text after")
    lines = block.text.splitlines()
    if block.lang in (SHELL, OUTPUT) and any(_PROMPT.match(line) for line in lines):
        problems.append(
            f"a `$ ` prompt in a ```{block.lang} block: commands go in a ```sh block without prompts, "
            "what they print in a ```text block right after it"
        )
    if block.marker is not None:
        problems += _marker_problems(block)
    if block.lang == SHELL and not _command_lines(lines):
        problems.append("a ```sh block without a command")
    return problems


def _marker_problems(block: _Block) -> list[str]:
    marker = block.marker
    assert marker is not None
    name = _match(_FILE, marker, "name")
    if name is not None:
        if block.lang == SHELL:
            return ["`docs-test: file` names the content of a file, not commands"]
        if PurePosixPath(name).is_absolute() or ".." in PurePosixPath(name).parts:
            return [f"`docs-test: file {name}`: the file goes in the working directory, name it relative to it"]
        return []
    if _SKIP.match(marker) or _EXIT.match(marker):
        return [] if block.lang == SHELL else [f"`docs-test: {marker}` belongs before a ```sh block"]
    if marker.startswith("skip"):
        return [f"`docs-test: {marker}`: say why it is skipped (`docs-test: skip — REASON`)"]
    return [f"`docs-test: {marker}`: not `skip — REASON`, `exit N` or `file NAME`"]


def _match(pattern: re.Pattern[str], marker: str | None, group: str) -> str | None:
    found = pattern.match(marker) if marker is not None else None
    return found[group] if found else None


def _commands(where: str, block: _Block, output: _Block | None, files: tuple[tuple[str, str], ...]) -> Commands:
    code = _match(_EXIT, block.marker, "code")
    return Commands(
        where=where,
        commands=_command_lines(block.text.splitlines()),
        skip=_match(_SKIP, block.marker, "reason"),
        exit_code=int(code) if code is not None else 0,
        output=output.text if output is not None else None,
        files=files,
    )


def _command_lines(lines: list[str]) -> tuple[str, ...]:
    """One entry a command: a line, with the lines a trailing backslash continues it onto."""
    commands: list[str] = []
    current: list[str] = []
    for line in lines:
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        current.append(line.rstrip())
        if not current[-1].endswith("\\"):
            commands.append("\n".join(current))
            current = []
    if current:
        commands.append("\n".join(current))
    return tuple(commands)
