"""One home per rule: a rule written once and imported everywhere else. Each test fails if a
copy comes back in the source of the League Manager or of our agents (docs/examples/ are the
students' stand-alone copies and are left out)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from leagueproto.envelope import AGENT_PROTOCOL_VERSION, GAME_TYPES
from leagueproto.timeouts import DEFAULT_TIMEOUTS, Timeouts
from leagueproto.timeouts import NAMES as TIMEOUT_NAMES
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


TIMEOUTS_HOME = ROOT / "leagueproto" / "timeouts.py"


def _timeout_copies(tree: ast.AST) -> list[int]:
    """Lines that write one of the default timeouts as a number next to its name: a dataclass
    field (``move: float = 30.0``), a keyword (``Timeouts(move=30.0)``), a dict entry
    (``{"move": 30}``, ``{"move_timeout": 30.0}``) or a model field
    (``move_timeout = models.FloatField(default=30.0)``). Other values (a test's or a bench's
    shorter limits) are not copies."""

    def default_for(name: str | None) -> float | None:
        if name and name.endswith("_timeout"):
            name = name.removesuffix("_timeout")
        return getattr(DEFAULT_TIMEOUTS, name) if name in TIMEOUT_NAMES else None

    def same(value: ast.AST | None, default: float | None) -> bool:
        return (
            default is not None
            and isinstance(value, ast.Constant)
            and isinstance(value.value, (int, float))
            and not isinstance(value.value, bool)
            and value.value == default
        )

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if same(node.value, default_for(node.target.id)):
                lines.append(node.lineno)
        elif isinstance(node, ast.keyword) and node.arg != "default" and same(node.value, default_for(node.arg)):
            lines.append(node.value.lineno)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                name = key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None
                if same(value, default_for(name)):
                    lines.append(value.lineno)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name.endswith("_timeout") and isinstance(node.value, ast.Call):
                for keyword in node.value.keywords:
                    if keyword.arg == "default" and same(keyword.value, default_for(name)):
                        lines.append(node.lineno)
    return sorted(lines)


def test_the_default_timeouts_are_written_once():
    copies = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in SOURCE
        for line in _timeout_copies(ast.parse(path.read_text(), str(path)))
    ]
    home = TIMEOUTS_HOME.relative_to(ROOT)
    assert [c for c in copies if not c.startswith(f"{home}:")] == []
    assert len(copies) == len(TIMEOUT_NAMES)  # one field each in the home, nowhere else


def test_the_timeout_finder_sees_each_form_of_copy():
    source = """
class League(models.Model):
    move_timeout = models.FloatField(default=30.0)
    retry_delay = models.FloatField(default=10.0)
class Limits:
    join: float = 5.0
    move: float = 2.0
LIMITS = Timeouts(report=10.0, move=1.0)
MESSAGE = {"timeouts": {"default": 10, "move": 0.5}, "game_over_timeout": 5.0}
"""
    assert _timeout_copies(ast.parse(source)) == [3, 6, 8, 9, 9]


def test_the_league_the_referee_and_the_check_start_from_the_same_defaults():
    from league.checkagent import TIMEOUTS as CHECK
    from league.models import League

    league = League(league_id="x", name="x")
    assert Timeouts(**{name: getattr(league, f"{name}_timeout") for name in TIMEOUT_NAMES}) == DEFAULT_TIMEOUTS
    assert Timeouts.from_mapping(None) == DEFAULT_TIMEOUTS
    assert (CHECK.join, CHECK.game_over) == (DEFAULT_TIMEOUTS.join, DEFAULT_TIMEOUTS.game_over)
