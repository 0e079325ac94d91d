"""MatchRunner without HTTP: both players' steps at once (both outcomes waited for, a cancelled
match cancelling both), and how the LM's timeouts are read."""

from __future__ import annotations

import asyncio

import pytest

from leagueproto.timeouts import Timeouts
from referee.games import get_game
from referee.runner import MatchRunner, MatchSpec, PlayerFailed, Seat


def runner() -> MatchRunner:
    spec = MatchSpec(None, 1, "R1M1", "even_odd", Seat("P01", "http://a/mcp"), Seat("P02", "http://b/mcp"))
    return MatchRunner(spec, get_game("even_odd"), client=None, sender="referee:REF01")  # type: ignore[arg-type]


async def test_both_players_steps_run_at_once_a_first():
    started: list[str] = []
    both_started = asyncio.Event()

    async def step(seat: Seat) -> None:
        started.append(seat.player_id)
        if len(started) == 2:
            both_started.set()
        await asyncio.wait_for(both_started.wait(), 1.0)  # one after the other would time out

    assert await runner().run_for_both(step) == []  # no player failed
    assert started == ["P01", "P02"]


async def test_run_for_both_waits_for_both_then_returns_the_failures_in_seat_order():
    finished: list[str] = []

    async def step(seat: Seat) -> None:
        await asyncio.sleep(0.02 if seat.player_id == "P01" else 0)
        finished.append(seat.player_id)
        raise PlayerFailed(seat.player_id, "declined")

    failures = await runner().run_for_both(step)
    assert [f.player_id for f in failures] == ["P01", "P02"]
    assert finished == ["P02", "P01"]


async def test_a_bug_in_one_step_is_raised_once_the_other_step_is_done():
    finished: list[str] = []

    async def step(seat: Seat) -> None:
        if seat.player_id == "P01":
            raise ValueError("a bug")
        await asyncio.sleep(0.02)
        finished.append(seat.player_id)

    with pytest.raises(ValueError, match="a bug"):
        await runner().run_for_both(step)
    assert finished == ["P02"]


@pytest.mark.parametrize("slow", [["P01"], ["P02"], ["P01", "P02"]])
async def test_cancelling_the_match_cancels_the_players_steps_still_running(slow):
    cancelled: list[str] = []
    waiting = asyncio.Event()

    async def step(seat: Seat) -> None:
        try:
            if seat.player_id not in slow:
                return
            if seat.player_id == slow[-1]:
                waiting.set()
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(seat.player_id)
            raise

    task = asyncio.create_task(runner().run_for_both(step))
    await waiting.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(cancelled) == slow


def test_timeouts_take_the_lms_positive_numbers_and_default_the_rest():
    timeouts = Timeouts.from_mapping({"join": 2, "move": 0.5, "game_over": 0, "report": True, "default": "7"})
    assert timeouts == Timeouts(join=2.0, move=0.5)
    assert isinstance(timeouts.join, float)
    assert Timeouts.from_mapping(None) == Timeouts() == Timeouts.from_mapping({})
