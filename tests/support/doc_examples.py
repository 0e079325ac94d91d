"""Run the copy-paste examples of docs/protocol.md, so the docs cannot rot.

An example is a ```bash block whose first command is ``curl`` (using $LM, $REFEREE or $PLAYER as
the URL), followed (blank lines allowed, nothing else) by a ```json block with the reply.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
VOLATILE = frozenset(
    {"timestamp", "conversation_id", "auth_token", "league_manager_token", "arrival_timestamp", "deadline"}
)
WILDCARD = "..."


@dataclass(frozen=True)
class DocExample:
    section: str
    line: int
    command: str
    expected: Any

    def __str__(self) -> str:
        return f"docs/protocol.md:{self.line} ({self.section})"


def _blocks(text: str) -> list[tuple[str, str, int, str]]:
    """(section, language, line, body) for every fenced block, in order; '' marks prose between."""
    out: list[tuple[str, str, int, str]] = []
    section = ""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            section = line[3:].strip()
            out.append((section, "", i + 1, "#"))
        elif line.startswith("```"):
            lang = line[3:].strip()
            start = i + 1
            body: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            out.append((section, lang, start, "\n".join(body)))
        elif line.strip():
            out.append((section, "", i + 1, "prose"))
        i += 1
    return out


def examples(section_heading: str, path: Path = DOC) -> list[DocExample]:
    """The curl examples of one ``## `` section of docs/protocol.md."""
    blocks = _blocks(path.read_text())
    found = []
    for current, following in zip(blocks, blocks[1:], strict=False):
        section, lang, line, body = current
        if section != section_heading or lang != "bash" or not body.lstrip().startswith("curl"):
            continue
        if following[1] != "json":
            raise AssertionError(f"docs/protocol.md:{line}: a curl example must be followed by its ```json reply")
        found.append(DocExample(section, line, body, json.loads(following[3])))
    return found


def run_example(example: DocExample, env: dict[str, str], timeout: float = 30.0) -> Any:
    """Run the example's shell command with ``env`` added; returns the parsed JSON it printed."""
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", example.command],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise AssertionError(f"{example}: exit {done.returncode}\n{done.stderr}")
    try:
        return json.loads(done.stdout)
    except ValueError as exc:
        raise AssertionError(f"{example}: output is not JSON:\n{done.stdout[:2000]}") from exc


def assert_same_shape(actual: Any, expected: Any, volatile: Iterable[str] = (), path: str = "$") -> None:
    """Same keys at every level; equal values, except volatile keys and "..." wildcards."""
    skip = VOLATILE | set(volatile)
    if expected == WILDCARD:
        return
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{path}: expected an object, got {actual!r}"
        assert set(actual) == set(expected), (
            f"{path}: keys differ: missing {sorted(set(expected) - set(actual))}, "
            f"unexpected {sorted(set(actual) - set(expected))}"
        )
        for key, value in expected.items():
            if key in skip:
                continue
            assert_same_shape(actual[key], value, skip, f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list), f"{path}: expected a list, got {actual!r}"
        assert len(actual) == len(expected), f"{path}: {len(actual)} items, the docs show {len(expected)}"
        for index, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_same_shape(a, e, skip, f"{path}[{index}]")
    else:
        assert actual == expected, f"{path}: got {actual!r}, the docs show {expected!r}"
