"""The API bench's registrations (league/bench/api.py)."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from league.bench.api import registration
from leagueproto.endpoint_policy import SERVICE_PORTS


@pytest.mark.parametrize("lm_port", [20000, 20007, 20199, 27016, 59999])
def test_a_bench_players_endpoint_is_its_own_and_one_the_lm_accepts(lm_port):
    # The LM refuses its own address as an agent's endpoint, and the bench's LM takes a free port
    # from the same range as these endpoints: one registration in a run was refused for it. It
    # refuses the well-known ports of other services too (27017 would be n = 7017's).
    meta = [registration("league", n, lm_port)["player_meta"] for n in range(8000)]
    ports = [urlsplit(m["contact_endpoint"]).port for m in meta]
    assert lm_port not in ports
    assert not set(ports) & set(SERVICE_PORTS)
    assert len(set(ports)) == len(ports)
