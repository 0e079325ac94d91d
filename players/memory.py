"""A player's memory: its matches, what each opponent did, statistics; optionally a JSON file.

The file (``<state-dir>/<name>.json``) also keeps the player's identity (id and token) so a
restarted player rejoins as itself and keeps learning. It is written atomically, mode 0600.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

MAX_MATCHES = 500  # enough to learn from, small enough to send in get_player_state
MAX_OPPONENT_HISTORY = 200


class Memory:
    def __init__(self, max_matches: int = MAX_MATCHES) -> None:
        self.max_matches = max_matches  # the latest this many matches are kept
        self.matches: list[dict[str, Any]] = []
        self.opponents: dict[str, dict[str, Any]] = {}
        self.stats: Counter[str] = Counter()
        self.standings: list[dict[str, Any]] = []
        self.league: dict[str, Any] = {}  # last round announcement, completion, champion
        self.errors: list[dict[str, Any]] = []
        # Our own parity choices per opponent over ``matches``, kept with it: choose_parity asks
        # for them on every call, and scanning every match we remember each time added up.
        self._my_choices: dict[str, list[str]] = {}

    # -- learning --------------------------------------------------------------------------
    def opponent(self, opponent_id: str) -> dict[str, Any]:
        return self.opponents.setdefault(
            opponent_id,
            {"played": 0, "wins": 0, "draws": 0, "losses": 0, "parity_choices": [], "moves": []},
        )

    def parity_history(self, opponent_id: str | None) -> list[str]:
        return list(self.opponents[opponent_id]["parity_choices"]) if opponent_id in self.opponents else []

    def move_history(self, opponent_id: str | None) -> list[int]:
        return list(self.opponents[opponent_id]["moves"]) if opponent_id in self.opponents else []

    def my_parity_history(self, opponent_id: Any) -> list[str]:
        if isinstance(opponent_id, str):
            return list(self._my_choices.get(opponent_id, ()))
        return self._scan_my_choices(opponent_id)

    def _scan_my_choices(self, opponent_id: Any) -> list[str]:
        return [m["my_choice"] for m in self.matches if m.get("opponent_id") == opponent_id and m.get("my_choice")]

    def _index_my_choices(self) -> None:
        self._my_choices = {}
        for match in self.matches:
            self._note_my_choice(match, +1)

    def _note_my_choice(self, match: dict[str, Any], change: int) -> None:
        """Add (+1) a match's choice to the index, or drop (-1) the oldest one it added."""
        opponent, choice = match.get("opponent_id"), match.get("my_choice")
        if not isinstance(opponent, str) or not choice:
            return  # only str ids are indexed; my_parity_history scans for anything else
        if change > 0:
            self._my_choices.setdefault(opponent, []).append(choice)
        elif self._my_choices.get(opponent):
            del self._my_choices[opponent][0]

    def has_match(self, league_id: str | None, match_id: str) -> bool:
        """Whether a finished match of that league is remembered (the latest first)."""
        return any(m.get("match_id") == match_id and m.get("league_id") == league_id for m in reversed(self.matches))

    def record_match(self, record: dict[str, Any]) -> None:
        """A finished match: ``result`` is WIN, DRAW, LOSS or TECHNICAL_LOSS from our side."""
        self.matches.append(record)
        self._note_my_choice(record, +1)
        for dropped in self.matches[: -self.max_matches]:
            self._note_my_choice(dropped, -1)
        del self.matches[: -self.max_matches]
        result = record.get("result")
        self.stats["played"] += 1
        key = {"WIN": "wins", "DRAW": "draws", "LOSS": "losses", "TECHNICAL_LOSS": "technical_losses"}.get(result)
        if key:
            self.stats[key] += 1
        self.stats["points"] += int(record.get("points") or 0)
        if record.get("my_choice") in ("even", "odd"):
            self.stats[f"chose_{record['my_choice']}"] += 1
        opponent_id = record.get("opponent_id")
        if not opponent_id:
            return
        profile = self.opponent(opponent_id)
        profile["played"] += 1
        if result == "WIN":
            profile["wins"] += 1
        elif result == "DRAW":
            profile["draws"] += 1
        elif result in ("LOSS", "TECHNICAL_LOSS"):
            profile["losses"] += 1
        if record.get("opponent_choice") in ("even", "odd"):
            profile["parity_choices"].append(record["opponent_choice"])
            del profile["parity_choices"][:-MAX_OPPONENT_HISTORY]
        moves = [m for m in record.get("opponent_moves") or [] if isinstance(m, int)]
        if moves:
            profile["moves"].extend(moves)
            del profile["moves"][:-MAX_OPPONENT_HISTORY]

    def record_error(self, error: dict[str, Any]) -> None:
        self.errors.append(error)
        del self.errors[:-50]
        self.stats["game_errors"] += 1

    # -- (de)serialising ---------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "stats": dict(self.stats),
            "matches": self.matches,
            "opponents": self.opponents,
            "standings": self.standings,
            "league": self.league,
            "errors": self.errors,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Memory:
        memory = cls()
        memory.stats = Counter(data.get("stats") or {})
        memory.matches = list(data.get("matches") or [])
        memory._index_my_choices()
        memory.opponents = dict(data.get("opponents") or {})
        memory.standings = list(data.get("standings") or [])
        memory.league = dict(data.get("league") or {})
        memory.errors = list(data.get("errors") or [])
        return memory


def load_state(path: Path) -> dict[str, Any]:
    """The saved ``{"identity": …, "memory": …}``, or empty when there is none (or it is corrupt)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_state(path: Path, data: dict[str, Any]) -> None:
    """Write atomically: a crash mid-write never leaves a half file behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle, indent=1)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
