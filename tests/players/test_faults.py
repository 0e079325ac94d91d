"""Fault-injection players against the real referee: each fault costs exactly what the rules say."""

from __future__ import annotations

import asyncio
from collections import Counter

from leagueproto.envelope import make_message
from leagueproto.serve import ThreadedServer
from players.agent import Lifecycle, Player, PlayerConfig, PlayerHost
from players.strategies import FAULTS
from referee.agent import Referee, RefereeConfig
from tests.support.waiting import wait_until

TIMEOUTS = {"join": 0.5, "move": 0.5, "game_over": 0.5, "report": 0.5, "default": 0.5}
# "impostor" names its opponent, but its answer comes from its own endpoint: it is its answer
# (docs/protocol.md, "Who an agent is"), logged, and costs nothing.
OUTSIDE_THE_RULES = set(FAULTS) - {"slow", "flapping", "impostor"}


def start_match(match_id: str, good: Player, bad: Player, game_type: str) -> dict:
    return make_message(
        "START_MATCH",
        "league_manager",
        league_id="faults",
        round_id=1,
        match_id=match_id,
        game_type=game_type,
        player_A_id=good.player_id,
        player_B_id=bad.player_id,
        player_A_endpoint=good.endpoint,
        player_B_endpoint=bad.endpoint,
        match_token=f"token-{match_id}",
        timeouts=TIMEOUTS,
        retry={"retries": 1, "delay": 0.05},
        max_invalid_moves=3,
    )


async def test_each_fault_costs_exactly_what_the_rules_say(scripted_lm, referee_client):
    good = Player(PlayerConfig(name="Good", strategy="random", league_url=scripted_lm.url, register_backoff=0.01))
    faulty = {
        f: Player(PlayerConfig(name=f, strategy=f, league_url=scripted_lm.url, register_backoff=0.01)) for f in FAULTS
    }
    host = PlayerHost([good, *faulty.values()], stay=True)
    players_server = host.start_in_thread()
    referee = Referee(RefereeConfig(name="Ref", league_url=scripted_lm.url, register=False, max_concurrent=32))
    referee.config.grace_seconds = 0.2
    referee_server = ThreadedServer(referee.asgi_app())
    referee.config.endpoint = referee_server.url
    referee_server.start()
    try:
        await asyncio.to_thread(wait_until, lambda: all(p.lifecycle == Lifecycle.REGISTERED for p in host.players))
        matches = {}
        for n, fault in enumerate(FAULTS, start=1):
            game = "even_odd_bo5" if fault in ("invalid_parity", "slow") else "even_odd"
            matches[f"R1M{n}"] = (fault, game)
        matches["R1M98"] = ("flapping", "even_odd")  # a second match: flapping is down every other one
        matches["R1M99"] = ("invalid_parity", "even_odd")
        for match_id, (fault, game) in matches.items():
            reply = (
                await referee_client.call(
                    referee_server.url, "start_match", start_match(match_id, good, faulty[fault], game)
                )
            ).reply
            assert reply["status"] == "ACCEPTED", reply
        await asyncio.to_thread(wait_until, lambda: set(scripted_lm.reports) == set(matches), 20)

        lost = Counter()
        for match_id, (fault, _) in matches.items():
            result = scripted_lm.reports[match_id]["result"]
            offenders = result.get("technical_loss") or []
            assert good.player_id not in offenders, (fault, result)  # a well-behaved player is never penalised
            lost[fault] += faulty[fault].player_id in offenders
        assert lost["slow"] == 0  # slow but inside the deadline: never a loss on time
        assert lost["flapping"] == 1  # down for one of its two matches
        assert lost["impostor"] == 0  # another name, its own endpoint: still its answer
        for fault in OUTSIDE_THE_RULES:
            assert lost[fault] == (2 if fault == "invalid_parity" else 1), fault
        # Each of its answers was refused (GAME_ERROR with the fault's code), asked again up to
        # max_invalid_moves times, then lost.
        expectations = {
            "wrong_type": ("message_type", "GAME_JOIN_ACK", "E002"),
        }
        for fault, (key, value, code) in expectations.items():
            match_id = next(m for m, (f, _) in matches.items() if f == fault)
            report = scripted_lm.reports[match_id]
            peer = faulty[fault].player_id
            log = report["match_log"]
            received = [
                e for e in log if e["direction"] == "IN" and e["method"] == "choose_parity" and e["peer"] == peer
            ]
            assert len(received) == 4, (fault, received)  # the first answer and 3 more chances
            assert all(e["message"].get(key) == value and e["outcome"] == "invalid" for e in received), fault
            errors = [e["message"] for e in log if e["direction"] == "OUT" and e["message_type"] == "GAME_ERROR"]
            assert [m["error_code"] for m in errors] == [code] * 4 and all(m["player_id"] == peer for m in errors)
            assert report["result"]["technical_loss"] == [peer] and report["result"]["winner"] == good.player_id
    finally:
        referee_server.stop()
        players_server.stop()
