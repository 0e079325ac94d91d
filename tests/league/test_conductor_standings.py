"""START_MATCH carries the two players' current records; the real referee hands each player its
own as ``your_standings`` in CHOOSE_PARITY_CALL."""

from __future__ import annotations

from contextlib import ExitStack

from league import actions
from league.models import League, MatchResult
from tests.league.lm_support import make_league, player_meta, register_player
from tests.league.test_conductor import FAST, conduct
from tests.referee.conftest import run_referee
from tests.referee.scripted import ScriptedPlayer, serving
from tests.support.servers import free_port


def records_before(league: League, round_number: int) -> dict[str, dict[str, int]]:
    """Recomputed from the stored results, independently of the conductor."""
    records: dict[str, dict[str, int]] = {}
    for result in MatchResult.objects.filter(league=league).select_related(
        "match__round", "match__player_a", "match__player_b"
    ):
        if result.match.round.number >= round_number:
            continue
        for player, points in ((result.match.player_a, result.points_a), (result.match.player_b, result.points_b)):
            record = records.setdefault(player.player_id, {"wins": 0, "losses": 0, "draws": 0})
            record[{3: "wins", 1: "draws", 0: "losses"}[points]] += 1
    return records


def test_each_match_tells_the_players_their_records_so_far(lm_server, tmp_path):
    league = make_league("standings_in_start", **FAST)
    choices = ["even", "odd", "odd", "even"]
    players = []
    with ExitStack() as stack:
        ref = stack.enter_context(
            run_referee(league_url=lm_server, league_id=league.league_id, state_dir=tmp_path, grace_seconds=0.5)
        )
        ref.wait_registered()
        for n, choice in enumerate(choices):
            port = free_port()
            endpoint = f"http://127.0.0.1:{port}/mcp"
            reply = register_player(lm_server, f"p{n}", player_meta=player_meta(endpoint), league_id=league.league_id)
            player = ScriptedPlayer(reply["player_id"], choices=[choice])
            stack.enter_context(serving(player.app(), port))
            players.append(player)
        actions.close_registration(league)
        conduct(league.league_id)

    league.refresh_from_db()
    assert league.status == League.Status.COMPLETED
    seen_a_record = False
    for player in players:
        calls = player.received.of("choose_parity")
        assert len(calls) == len(choices) - 1  # one per opponent
        for call in calls:
            expected = records_before(league, call["round_id"]).get(
                player.player_id, {"wins": 0, "losses": 0, "draws": 0}
            )
            assert call["context"]["your_standings"] == expected, (player.player_id, call["round_id"])
            seen_a_record |= sum(expected.values()) > 0
        assert calls[0]["context"]["your_standings"] == {"wins": 0, "losses": 0, "draws": 0}
    assert seen_a_record
