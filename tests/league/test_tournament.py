"""The tournament views' pure rules: form, crosstable, agent health."""

from __future__ import annotations

import random

from league.tournament import Call, Played, agent_health, crosstable, percentile, recent_form, slow_note
from leagueproto.scoring import compute_standings


def _rows(players: list[str], played: list[Played]) -> list[dict]:
    return [
        {**row.__dict__, "display_name": row.player_id} for row in compute_standings(players, [p.row() for p in played])
    ]


def win(match_id: str, rnd: int, a: str, b: str, **kw) -> Played:
    return Played(match_id, rnd, a, b, 3, 0, **kw)


def draw(match_id: str, rnd: int, a: str, b: str) -> Played:
    return Played(match_id, rnd, a, b, 1, 1)


def test_recent_form_is_the_last_five_oldest_first_with_technical_losses_marked():
    played = [win(f"R{i}M1", i, "P01", "P02") for i in range(1, 7)]
    played.append(Played("R7M1", 7, "P01", "P02", 0, 3, technical_a=True))
    form = recent_form(["P01", "P02"], played)
    assert [f["mark"] for f in form["P01"]] == ["W", "W", "W", "W", "L"]
    assert form["P01"][-1]["technical"] and not form["P02"][-1]["technical"]
    assert [f["match_id"] for f in form["P02"]] == ["R3M1", "R4M1", "R5M1", "R6M1", "R7M1"]


def test_recent_form_takes_each_players_latest_results_by_round_then_match_whatever_order_they_came_in():
    rng = random.Random(7)
    ids = [f"P{i:02d}" for i in range(1, 9)]
    played = []
    for rnd in range(1, 12):
        order = rng.sample(ids, len(ids))
        # Some players sit a round out, so their form reaches further back than the others'.
        for m, (a, b) in enumerate(zip(order[0:6:2], order[1:6:2], strict=True), start=1):
            played.append(Played(f"R{rnd}M{m}", rnd, a, b, *rng.choice([(3, 0), (1, 1), (0, 3)])))
    rng.shuffle(played)  # recorded out of order: stragglers of earlier rounds come in late
    newest_first = sorted(played, key=lambda p: (p.round, p.match_id), reverse=True)
    form = recent_form([*ids, "P99"], played)
    for pid in ids:
        mine = [p.match_id for p in newest_first if pid in (p.player_a, p.player_b)][:5]
        assert [f["match_id"] for f in form[pid]] == mine[::-1]
    assert form["P99"] == []  # registered, never played
    assert played[0].row() is played[0].row()  # the ranking's row is made once per result


def test_crosstable_holds_both_legs_of_a_double_round_robin_and_best_of_five_scores():
    played = [
        Played("R1M1", 1, "P01", "P02", 3, 0, games_a=3, games_b=1),
        Played("R2M1", 2, "P02", "P01", 3, 0, games_a=3, games_b=2),
        Played("R3M1", 3, "P01", "P03", 0, 0, technical_a=True, technical_b=True),
    ]
    order = [{"player_id": p, "display_name": p} for p in ("P01", "P02", "P03")]
    x = crosstable(order, played)
    p01 = x["rows"][0]["cells"]
    assert p01[0] is None
    assert [(c["mark"], c["score"]) for c in p01[1]] == [("W", "3–1"), ("L", "2–3")]
    assert [(c["mark"], c["technical"]) for c in p01[2]] == [("L", True)]
    assert [(c["mark"], c["score"]) for c in x["rows"][1]["cells"][0]] == [("L", "1–3"), ("W", "3–2")]
    assert x["rows"][2]["cells"][1] == []


def test_agent_health_reports_latency_timeouts_errors_and_the_last_contact():
    calls = [Call(f"2025-01-15T10:00:{i:02d}Z", "choose_parity", "ok", float(i)) for i in range(1, 21)]
    calls.append(Call("2025-01-15T10:01:00Z", "choose_parity", "timeout", 30000.0))
    calls.append(Call("2025-01-15T10:02:00Z", "notify_round", "connection_error", error="E009: refused"))
    health = agent_health(calls)
    assert (health["latency_p50_ms"], health["latency_p95_ms"]) == (10.0, 19.0)
    assert (health["calls"], health["answered"], health["timeouts"], health["errors"]) == (22, 20, 1, 1)
    assert health["state"] == "failing" and health["failing_streak"] == 2
    assert health["last_contact"]["why"] == "could not connect for notify_round: E009: refused"
    assert health["summary"].startswith("Failing: the last 2 calls went unanswered")


def test_an_agent_that_never_answered_says_so():
    health = agent_health([Call("2025-01-15T10:00:00Z", "handle_game_invitation", "timeout")] * 3)
    assert health["state"] == "silent"
    assert health["summary"] == (
        "Never answered: 3 calls, 3 timed out; last: no answer to handle_game_invitation in time (timeout)."
    )
    assert agent_health([])["summary"] == "Not called by the league yet."


def test_percentile_is_nearest_rank():
    assert percentile([], 0.5) is None
    assert percentile([5.0], 0.95) == 5.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.0


def test_slow_note_names_a_player_whose_moves_take_most_of_the_timeout():
    note = slow_note([4700.0, 4800.0, 4900.0, 4750.0, 4850.0], move_timeout=5.0)
    assert note is not None
    assert "answers a move in 4.8 s (median; 9 in 10 within 4.9 s)" in note
    assert "the move timeout is 5 s: every round waits for this player" in note


def test_slow_note_says_nothing_of_a_fast_player_or_too_few_answers():
    assert slow_note([120.0, 300.0, 2400.0], move_timeout=5.0) is None  # the median is well inside
    assert slow_note([2500.0, 2500.0, 2500.0], move_timeout=5.0) is None  # exactly half: not slow yet
    assert slow_note([4900.0, 4900.0], move_timeout=5.0) is None  # two answers say too little
    assert slow_note([], move_timeout=30.0) is None
    assert slow_note([16_000.0] * 3, move_timeout=30.0) is not None  # the league's own timeout is the measure
