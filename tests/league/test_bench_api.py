"""The API bench's registrations (league/bench/api.py)."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from league.bench.api import registration


@pytest.mark.parametrize("lm_port", [20000, 20007, 20199, 59999])
def test_a_bench_players_endpoint_is_its_own_and_never_the_lms_port(lm_port):
    # The LM refuses its own address as an agent's endpoint, and the bench's LM takes a free port
    # from the same range as these endpoints: one registration in a run was refused for it.
    ports = [urlsplit(registration("league", n, lm_port)["player_meta"]["contact_endpoint"]).port for n in range(400)]
    assert lm_port not in ports
    assert len(set(ports)) == len(ports)
