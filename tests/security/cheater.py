"""A cheating player's strategy: during its own turn it polls every tool of the referee (and the
League Manager's public reads of the match) for the opponent's answer to that turn, and plays the
winning reply when it finds one. Used by tests/security/test_match_privacy.py; never in the product.

It asks with every credential a player has: none, its own registration token, and the match
token the referee's invitation carried (as ``auth_token`` and as ``Authorization: Bearer``), in
both dialects (the tool name as method, and MCP ``tools/call``). What it saw is counted, so a test
can tell "learned nothing" from "did not try".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx

from leagueproto.envelope import make_message
from players.agent import Player
from players.strategies.base import MoveSituation, ParitySituation, Strategy, number_of_parity, opposite, wanted_parity

ANSWER_OF = {"even_odd": "CHOOSE_PARITY_RESPONSE", "even_odd_bo5": "MOVE_RESPONSE"}


def _walk(value: Any) -> Iterator[dict[str, Any]]:
    """Every JSON object inside ``value`` (itself included)."""
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


def opponent_answers(payload: Any, opponent: str, message_type: str) -> list[dict[str, Any]]:
    """The opponent's answers (``message_type``) that a reply shows: entries of a match log the
    referee received from the opponent, in order."""
    return [
        entry["message"]
        for entry in _walk(payload)
        if entry.get("direction") == "IN"
        and entry.get("peer") == opponent
        and isinstance(entry.get("message"), dict)
        and entry["message"].get("message_type") == message_type
    ]


class Cheater(Strategy):
    """Polls for the opponent's answer to the open turn for up to ``spy_share`` of its budget
    (at most ``spy_seconds``: an honest opponent answers in milliseconds)."""

    name = "cheater"
    blocking = True  # it makes HTTP calls: run in the player's thread pool

    def __init__(
        self,
        referee_url: str,
        lm_url: str,
        league_id: str,
        *,
        spy_share: float = 0.5,
        spy_seconds: float = 0.8,
        **options: Any,
    ):
        super().__init__(**options)
        self.referee_url = referee_url
        self.lm_url = lm_url
        self.lm_base = lm_url.removesuffix("/mcp")
        self.league_id = league_id
        self.spy_share = spy_share
        self.spy_seconds = spy_seconds
        self.player: Player | None = None  # set once the player is built (its tokens)
        self.watch_for: list[str] = []  # strings no reply may contain (the players' endpoints)
        self.lock = threading.Lock()
        self.decisions = 0
        self.learned = 0  # decisions taken knowing the opponent's answer to the same turn
        self.polls = 0  # requests sent
        self.answered: dict[str, int] = {}  # tool → successful (non-error) replies
        self.refusals: dict[str, set[str]] = {}  # tool → error codes received
        self.leaks: list[str] = []  # watched strings found in replies
        self._tools: list[str] | None = None
        self._cursor = 0  # where the next round of polls starts (``_poll``)

    # -- the strategy -----------------------------------------------------------------------
    def choose_parity(self, situation: ParitySituation) -> str:
        seen = self._spy(situation.match_id, situation.opponent_id, "even_odd", 1, situation.budget)
        if seen is not None and seen.get("parity_choice") in ("even", "odd"):
            return opposite(seen["parity_choice"])
        return self.rng.choice(("even", "odd"))

    def choose_move(self, situation: MoveSituation) -> int:
        s = situation
        seen = self._spy(s.match_id, s.opponent_id, "even_odd_bo5", s.game_round, s.budget)
        move = seen.get("move") if seen is not None else None
        number = move.get("number") if isinstance(move, dict) else move  # {"number": n}, or a bare n
        if isinstance(number, int):
            parity = "even" if number % 2 == 0 else "odd"
            return number_of_parity(wanted_parity(situation.role, parity), self.rng)
        return number_of_parity(self.rng.choice(("even", "odd")), self.rng)

    # -- spying -----------------------------------------------------------------------------
    def _spy(self, match_id: str, opponent: str | None, game: str, turn: int, budget: float) -> dict[str, Any] | None:
        """The opponent's answer to turn ``turn`` of ``match_id`` if any poll shows it, else None."""
        with self.lock:
            self.decisions += 1
        until = time.monotonic() + min(self.spy_seconds, max(0.2, budget * self.spy_share))
        with httpx.Client(timeout=2.0) as http:
            while time.monotonic() < until:
                for payload in self._poll(http, match_id):
                    answers = opponent_answers(payload, opponent or "", ANSWER_OF[game])
                    if len(answers) >= turn:
                        with self.lock:
                            self.learned += 1
                        return answers[turn - 1]
                    if time.monotonic() >= until:
                        break  # answer in time: a loaded machine makes a round of polls slow
                time.sleep(0.02)
        return None

    def _credentials(self, match_id: str) -> list[str | None]:
        found: list[str | None] = [None]
        player = self.player
        if player is not None:
            for token in (player.token, player.in_play.get(match_id, {}).get("token")):
                if token and token not in found:
                    found.append(token)
        return found

    def _tool_names(self, http: httpx.Client) -> list[str]:
        if self._tools is None:
            reply = http.post(self.referee_url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).json()
            self._tools = [tool["name"] for tool in reply["result"]["tools"]]
        return self._tools

    def _poll(self, http: httpx.Client, match_id: str) -> Iterator[Any]:
        """One round of questions about ``match_id``: every referee tool with every credential in
        both dialects, then the LM's match page data (API detail and log, the MCP resource). A
        round starts where the last one stopped (``_cursor``): on a loaded machine a decision's
        time runs out within a round, and starting over at the first tool each time, the later
        ones would never be asked at all."""
        asks: list[tuple[str, str, str, Any, dict[str, str]]] = []
        for tool in self._tool_names(http):
            for token in self._credentials(match_id):
                message = make_message(
                    "GET_MATCH_STATE" if tool == "get_match_state" else "LEAGUE_QUERY",
                    f"player:{self.player.player_id if self.player else 'cheater'}",
                    auth_token=token,
                    league_id=self.league_id,
                    match_id=match_id,
                )
                headers = {"Authorization": f"Bearer {token}"} if token else {}
                for body in (
                    {"jsonrpc": "2.0", "id": 1, "method": tool, "params": message},
                    {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": message}},
                ):
                    asks.append((tool, "POST", self.referee_url, body, headers))
        api = f"{self.lm_base}/api/leagues/{self.league_id}/matches/{match_id}/"
        asks.append(("api-match", "GET", api, None, {}))
        asks.append(("api-match-log", "GET", api + "log/", None, {}))
        uri = f"game://state/{self.league_id}/{match_id}"
        read = {"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": uri}}
        asks.append(("lm-resource", "POST", self.lm_url, read, {}))
        for _ in asks:
            what, verb, url, body, headers = asks[self._cursor % len(asks)]
            self._cursor += 1
            yield self._ask(http, what, verb, url, body, headers)

    def _ask(
        self, http: httpx.Client, what: str, verb: str, url: str, body: Any = None, headers: dict | None = None
    ) -> Any:
        try:
            response = http.request(verb, url, json=body, headers=headers)
        except httpx.HTTPError:
            return None
        with self.lock:
            self.polls += 1
            for watched in self.watch_for:
                if watched in response.text:
                    self.leaks.append(f"{what}: {watched}")
        try:
            payload = response.json()
        except ValueError:
            return None
        result = payload.get("result") if isinstance(payload, dict) and "jsonrpc" in payload else payload
        error = _error_code(result) if isinstance(payload, dict) and "error" not in payload else "jsonrpc"
        with self.lock:
            if error is None:
                self.answered[what] = self.answered.get(what, 0) + 1
            else:
                self.refusals.setdefault(what, set()).add(error)
        return payload


def _error_code(result: Any) -> str | None:
    """The league error code of a reply (either dialect), or None for an answer."""
    if isinstance(result, dict) and isinstance(result.get("structuredContent"), dict):
        result = result["structuredContent"]
    if isinstance(result, dict) and result.get("message_type") in ("GAME_ERROR", "LEAGUE_ERROR"):
        return str(result.get("error_code"))
    return None
