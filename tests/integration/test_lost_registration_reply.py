"""A player that never hears its registration reply (every reply lost on the way back: a TCP proxy
drops them) is registered all the same and the league starts with it: the LM knows it by its
endpoint. It plays its matches without knowing its id, by the id its referees address it as, and
what it remembers of each match is the outcome recorded for it, a WIN as a WIN."""

from __future__ import annotations

import json

import pytest

from league.bench.told import recorded_outcomes
from league.models import Player
from tests.compat.test_course_league import ReplyDropper
from tests.integration.test_recovery import FAST
from tests.integration.worlds import Host, MixedWorld
from tests.support.servers import free_ports

pytestmark = pytest.mark.processes

# Opposite fixed choices: no draws, so each match is a win or a loss for the unheard player.
HEARD = Host("Heard", "always_odd", 3)
UNHEARD = Host("Unheard", "always_even", 1)


class DroppedReplies(MixedWorld):
    """The world of the recovery tests, the ``UNHEARD`` host reaching the LM through a proxy that
    drops every reply."""

    def start(self) -> None:
        self.dropper = ReplyDropper(self.lm_port, free_ports(1), drop=10**6)
        super().start()

    def host_url(self, host: Host) -> str:
        return f"http://127.0.0.1:{self.dropper.port}/mcp" if host is UNHEARD else self.lm_url

    def stop(self) -> None:
        super().stop()
        self.dropper.close()


@pytest.fixture
def world(agent_env, manage_py, tmp_path):
    w = DroppedReplies(agent_env, manage_py, tmp_path, "unheard", [HEARD, UNHEARD], **FAST)
    try:
        w.start()
        yield w
    finally:
        w.stop()


def test_a_player_that_never_hears_its_id_remembers_each_outcome_as_recorded(world):
    world.conductor()
    world.wait_completed()
    world.assert_each_match_recorded_once()
    assert world.dropper.dropped >= 1 and all(b"LEAGUE_REGISTER_RESPONSE" in reply for reply in world.dropper.lost)

    (unheard,) = world.ids_of(UNHEARD)
    state = json.loads((world.tmp / UNHEARD.name / f"{UNHEARD.name}.json").read_text())
    assert state["identity"]["player_id"] is None  # it never learnt its id
    told = {m["match_id"]: m["result"] for m in state["memory"]["matches"]}
    assert {m["player_id"] for m in state["memory"]["matches"]} == {unheard}  # the seat it was told as
    recorded = {
        match: outcome for (player, match), outcome in recorded_outcomes(world.league).items() if player == unheard
    }
    assert len(recorded) == world.players - 1 and set(recorded.values()) <= {"WIN", "LOSS"}
    assert told == recorded
    # The printed outcomes name it by that id too, and agree with the record, as every player's do.
    world.assert_told_equals_recorded()
    assert Player.objects.get(league=world.league, player_id=unheard).display_name == UNHEARD.name
