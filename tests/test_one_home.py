"""One home per rule: a rule written once and imported everywhere else. Each test fails if a
copy comes back in the source of the League Manager or of our agents (docs/examples/ are the
students' stand-alone copies and are left out)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from leagueproto.envelope import AGENT_PROTOCOL_VERSION, GAME_TYPES
from referee.games import GAMES

ROOT = Path(__file__).resolve().parent.parent
SOURCE = [
    path
    for package in ("leagueproto", "league", "referee", "players", "leaguesite")
    for path in (ROOT / package).rglob("*.py")
    if "migrations" not in path.parts
]
HOME = ROOT / "leagueproto" / "envelope.py"


def _strings(node: ast.AST) -> list[str]:
    return [e.value for e in getattr(node, "elts", []) if isinstance(e, ast.Constant) and isinstance(e.value, str)]


def test_the_referees_games_are_the_protocols_list_and_each_has_its_section_in_the_docs():
    assert tuple(GAMES) == GAME_TYPES
    anchors = {
        re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        for heading in re.findall(r"^#+ (.+)$", (ROOT / "docs" / "protocol.md").read_text(), re.M)
    }
    for rules in GAMES.values():
        assert rules.docs_anchor in anchors, rules.game_type


def test_the_game_list_is_written_once():
    copies = []
    for path in SOURCE:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(set(_strings(node)) & set(GAME_TYPES)) > 1:
                copies.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert copies == [f"{HOME.relative_to(ROOT)}:{_line_of('GAME_TYPES =')}"]


def test_the_agent_protocol_version_is_written_once():
    literal = f'"{AGENT_PROTOCOL_VERSION}"'
    copies = [str(path.relative_to(ROOT)) for path in SOURCE if literal in path.read_text()]
    assert copies == [str(HOME.relative_to(ROOT))]


def _line_of(text: str) -> int:
    return next(n for n, line in enumerate(HOME.read_text().splitlines(), start=1) if line.startswith(text))
