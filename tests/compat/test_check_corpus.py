"""The check's corpus (tests/compat/cases/check.json): agents written from the course with the
habits issue 34 saw in real students' agents, each run through "Check my agent" over real HTTP
(``CoursePlayer``, tests/league/checkagent_support.py). The verdicts must match how such an
agent plays a league, and the fix must name its real defect."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from league.checkagent import run_check
from referee.runner import Timeouts
from tests.compat.conftest import load_cases
from tests.league.checkagent_support import CoursePlayer, serving_course_player

ONE_SECOND = Timeouts(join=1.0, move=1.0, game_over=1.0, report=1.0, default=1.0)
CASES = load_cases("check")


def course_player(habits: dict[str, Any]) -> CoursePlayer:
    habits = dict(habits)
    if "timestamp" in habits:
        stamp = habits.pop("timestamp")
        habits["timestamp"] = lambda: stamp
    if "rpc_errors" in habits:
        habits["rpc_errors"] = {tool: tuple(error) for tool, error in habits["rpc_errors"].items()}
    return CoursePlayer(**habits)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_the_check_judges_each_course_agent_as_it_plays(case):
    with serving_course_player(course_player(case["player"])) as url:
        report = asyncio.run(run_check(url, timeouts=ONE_SECOND))
    expect = case["expect"]
    shown = {s.message_type: (s.verdict, s.note, s.fix) for s in report.steps}
    for key in ("plays_match", "takes_notices", "verdict"):
        if key in expect:
            assert getattr(report, key) == expect[key], (key, shown)
    if "id_warning" in expect:
        assert (report.id_warning or "").startswith(expect["id_warning"]), report.id_warning
    if "step" in expect:
        message_type, verdict, phrase = expect["step"]
        steps = [s for s in report.steps if s.message_type == message_type]
        assert steps and steps[0].verdict == verdict, shown
        assert any(phrase in f"{s.note} {s.fix}" for s in steps), shown
    if "said_once" in expect:
        # Said on the first row (with how many others), the rest point to it.
        saying = [s for s in report.steps if expect["said_once"] in (s.note or "") and not s.same_as]
        assert len(saying) == 1 and "other replies" in saying[0].shown_note, [s.shown_note for s in report.steps]
