"""The "Player side" examples of docs/protocol.md, run with curl against a live player."""

from __future__ import annotations

import pytest

from players.agent import Lifecycle
from tests.players.conftest import player
from tests.support.doc_examples import assert_same_shape, examples, run_example
from tests.support.waiting import wait_until

EXAMPLES = examples("Player side")


def test_the_player_section_has_examples():
    assert len(EXAMPLES) >= 5


@pytest.fixture
def documented_player(scripted_lm, serve_players):
    p = player(
        "Alpha",
        strategy="always_even",
        league_url=scripted_lm.url,
        league_id="league_2025_even_odd",
        register_backoff=0.01,
    )
    serve_players(p, register=True)
    wait_until(lambda: p.lifecycle == Lifecycle.REGISTERED)
    return p


def test_the_player_examples_work_as_documented(documented_player):
    env = {"PLAYER": documented_player.endpoint}
    for example in EXAMPLES:  # in order: they play one match
        assert_same_shape(run_example(example, env), example.expected)
