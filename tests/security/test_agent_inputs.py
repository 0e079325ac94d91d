"""No input reaches an exception on the agents' /mcp: every field of every tool of the player and
the referee, sent with each JSON type it should not have, gets a league error (or is taken), never
a JSON-RPC -32603 nor an HTTP 500. Through real HTTP, against served agents."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from leagueproto.asgi import make_asgi_app
from leagueproto.envelope import deadline_in, make_message
from leagueproto.server import McpServer
from players.agent import Player, PlayerConfig, PlayerHost
from tests.players.conftest import ScriptedLM as ScriptedPlayerLM
from tests.referee.conftest import FAST_RETRY, FAST_TIMEOUTS, run_referee
from tests.referee.scripted import ScriptedLM, ScriptedPlayer, serving
from tests.support.waiting import wait_until

# One of each JSON type, and text compare_digest cannot take: whatever a field should be, most of
# these are not it.
ODD_VALUES: list[Any] = [-1, 1.5, True, None, "é", [1, "é"], {"a": {"b": 1}}]
_ids = itertools.count(1)
_http = httpx.Client(timeout=20)  # one client: a new one per call costs more than the call


def rpc(url: str, method: str, params: Any) -> tuple[int, dict[str, Any]]:
    body = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params}
    response = _http.post(url, json=body)
    return response.status_code, response.json()


def variants(message: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``message`` with one field (top level, or one level down in an object) set to each odd value."""
    for key, value in message.items():
        paths = [(key,)] + ([(key, inner) for inner in value] if isinstance(value, dict) else [])
        for path in paths:
            for odd in ODD_VALUES:
                changed = copy.deepcopy(message)
                target = changed
                for part in path[:-1]:
                    target = target[part]
                target[path[-1]] = odd
                yield ".".join(path) + f"={odd!r:.20}", changed


def assert_never_crashes(url: str, method: str, message: dict[str, Any]) -> int:
    """Every variant of ``message`` answered without an internal error; returns how many were sent."""
    sent = 0
    for label, changed in variants(message):
        status, payload = rpc(url, method, changed)
        sent += 1
        assert status < 500, (method, label, status, payload)
        error = payload.get("error") or {}
        assert error.get("code") != -32603, (method, label, payload)
        if "result" in payload:
            assert isinstance(payload["result"], dict), (method, label, payload)
    return sent


def envelope(message_type: str, sender: str, **fields: Any) -> dict[str, Any]:
    return make_message(message_type, sender, conversation_id="conv-fuzz", **fields)


def referee_calls(token: str) -> list[tuple[str, dict[str, Any]]]:
    game = {"league_id": "test_league", "round_id": 1, "match_id": "R1M1", "player_id": "P01"}
    sender = "referee:REF01"
    return [
        (
            "handle_game_invitation",
            envelope(
                "GAME_INVITATION",
                sender,
                auth_token=token,
                **game,
                game_type="even_odd",
                role_in_match="PLAYER_A",
                opponent_id="P02",
            ),
        ),
        (
            "choose_parity",
            envelope(
                "CHOOSE_PARITY_CALL",
                sender,
                auth_token=token,
                **game,
                game_type="even_odd",
                context={"opponent_id": "P02", "round_id": 1, "your_standings": {"wins": 0}},
                deadline=deadline_in(5),
            ),
        ),
        (
            "notify_game_start",
            envelope(
                "GAME_START",
                sender,
                auth_token=token,
                **game,
                game_config={"game_type": "even_odd_bo5"},
                players=[{"player_id": "P01", "role": "ODD"}],
            ),
        ),
        (
            "make_move",
            envelope(
                "MOVE_REQUEST",
                sender,
                auth_token=token,
                **game,
                game_round=1,
                game_state={"your_role": "ODD", "scores": {}, "previous_rounds": []},
                time_limit_seconds=2,
                deadline=deadline_in(5),
            ),
        ),
        (
            "notify_round_result",
            envelope(
                "ROUND_RESULT",
                sender,
                auth_token=token,
                **game,
                game_round=1,
                moves={"P01": 1, "P02": 2},
                sum=3,
                sum_type="odd",
                round_winner="P01",
                scores={"P01": 1},
            ),
        ),
        (
            "notify_game_error",
            envelope(
                "GAME_ERROR",
                sender,
                auth_token=token,
                match_id="R1M1",
                round_id=1,
                error_code="E004",
                error_description="bad",
                consequence="retry",
            ),
        ),
        (
            "notify_match_result",
            envelope(
                "GAME_OVER",
                sender,
                auth_token=token,
                **game,
                game_type="even_odd",
                game_result={
                    "status": "WIN",
                    "winner_player_id": "P01",
                    "drawn_number": 4,
                    "choices": {"P01": "even", "P02": "odd"},
                    "rounds": [{"moves": {"P02": 1}}],
                },
            ),
        ),
    ]


def lm_calls(token: str | None) -> list[tuple[str, dict[str, Any]]]:
    lm = {"league_id": "test_league", "round_id": 1, "auth_token": token}
    return [
        (
            "notify_round",
            envelope(
                "ROUND_ANNOUNCEMENT",
                "league_manager",
                **lm,
                matches=[{"match_id": "R1M1", "game_type": "even_odd", "player_A_id": "P01", "player_B_id": "P02"}],
            ),
        ),
        (
            "update_standings",
            envelope(
                "LEAGUE_STANDINGS_UPDATE",
                "league_manager",
                **lm,
                standings=[{"rank": 1, "player_id": "P01", "points": 3}],
            ),
        ),
        ("notify_round_completed", envelope("ROUND_COMPLETED", "league_manager", **lm, next_round_id=2)),
        ("get_player_state", {}),
        ("ping", {}),
    ]


@pytest.fixture
def served_player(tmp_path) -> Iterator[Player]:
    lm = ScriptedPlayerLM()
    with serving(make_asgi_app(McpServer(lm.toolset()))) as lm_server:
        config = PlayerConfig(name="Fuzz", league_url=lm_server.url, state_dir=tmp_path, register_backoff=0.01)
        player = Player(config)
        host = PlayerHost([player], register=True, stay=True)
        server = host.start_in_thread()
        try:
            wait_until(lambda: player.player_id is not None)
            yield player
        finally:
            server.stop()


def test_no_input_crashes_a_player(served_player):
    player = served_player
    # Referee calls: the match token of the invitation (the player binds it on the first one).
    sent = sum(assert_never_crashes(player.endpoint, m, msg) for m, msg in referee_calls("match-token"))
    # LM notifications, checked against the league_manager_token the player got at registration.
    sent += sum(assert_never_crashes(player.endpoint, m, msg) for m, msg in lm_calls(player.lm_token))
    assert sent > 400


def test_a_non_ascii_lm_token_is_e012_not_an_exception(served_player):
    # compare_digest raises TypeError on non-ASCII text: the token is compared as UTF-8 bytes.
    _, msg = lm_calls("é")[0]
    status, payload = rpc(served_player.endpoint, "notify_round", msg)
    assert status == 200
    assert payload["result"]["error_code"] == "E012", payload


def test_no_input_crashes_a_referee(tmp_path):
    lm = ScriptedLM()
    with (
        serving(lm.app()) as lm_server,
        ExitStackPlayers() as (url_a, url_b),
        run_referee(league_url=lm_server.url, state_dir=tmp_path, max_concurrent=2) as running,
    ):
        running.wait_registered()
        url = running.url
        start = make_message(
            "START_MATCH",
            "league_manager",
            conversation_id="conv-fuzz",
            auth_token=ScriptedLM.LM_TOKEN,
            league_id="test_league",
            round_id=1,
            match_id="R1M1",
            game_type="even_odd",
            player_A_id="P01",
            player_B_id="P02",
            player_A_endpoint=url_a,
            player_B_endpoint=url_b,
            match_token="match-token",
            timeouts=FAST_TIMEOUTS,
            retry=FAST_RETRY,
            max_invalid_moves=1,
            standings={"P01": {"wins": 0}},
        )
        short = {
            "match_id": "S1",
            "game_type": "even_odd",
            "auth_token": ScriptedLM.LM_TOKEN,
            "round_id": 1,
            "timeouts": FAST_TIMEOUTS,
            "player1": {"player_id": "A", "display_name": "Ann", "endpoint": url_a},
            "player2": {"player_id": "B", "display_name": "Bob", "endpoint": url_b},
        }
        lm_notice = {"league_id": "test_league", "auth_token": ScriptedLM.LM_TOKEN}
        calls = [
            ("start_match", start),
            ("run_match", start),
            ("run_match", short),
            ("get_match_state", {"match_id": "R1M1", "league_id": "test_league"}),
            (
                "notify_round",
                envelope(
                    "ROUND_ANNOUNCEMENT", "league_manager", **lm_notice, round_id=1, matches=[{"match_id": "R1M1"}]
                ),
            ),
            (
                "notify_league_completed",
                envelope(
                    "LEAGUE_COMPLETED",
                    "league_manager",
                    **lm_notice,
                    champion={"player_id": "P01"},
                    final_standings=[],
                ),
            ),
            (
                "choose_parity",
                {
                    "message_type": "CHOOSE_PARITY_RESPONSE",
                    "match_id": "R1M1",
                    "sender": "player:P01",
                    "parity_choice": "even",
                },
            ),
        ]
        sent = sum(assert_never_crashes(url, method, msg) for method, msg in calls)
    assert sent > 300


def test_run_match_short_form_with_a_numeric_token_is_e012(tmp_path):
    lm = ScriptedLM()
    with serving(lm.app()) as lm_server, run_referee(league_url=lm_server.url, state_dir=tmp_path) as running:
        running.wait_registered()
        short = {"match_id": "S1", "auth_token": 5, "player1": {"endpoint": "x"}, "player2": {"endpoint": "y"}}
        status, payload = rpc(running.url, "run_match", short)
    assert status == 200
    assert payload["result"]["error_code"] == "E012", payload
    assert payload["result"]["context"]["field"] == "auth_token"


class ExitStackPlayers:
    """Two scripted players that always answer (so fuzzed matches finish at once)."""

    def __enter__(self) -> tuple[str, str]:
        self._servers = [serving(ScriptedPlayer(pid, choices=["even"]).app()) for pid in ("P01", "P02")]
        return tuple(s.__enter__().url for s in self._servers)  # type: ignore[return-value]

    def __exit__(self, *exc: Any) -> None:
        for server in self._servers:
            server.__exit__(*exc)
