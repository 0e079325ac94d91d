"""league/endpoints.py at connection time: the conductor's ConnectPolicy."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync

from league.endpoints import ConnectPolicy
from league.models import League
from tests.league.lm_support import make_league


@pytest.mark.django_db(transaction=True)
def test_the_calls_that_find_the_rules_stale_share_one_reload(monkeypatch):
    league = make_league(allowed_networks="127.0.0.0/8")
    loads: list[int] = []
    load = ConnectPolicy._load
    monkeypatch.setattr(ConnectPolicy, "_load", lambda self: (loads.append(1), load(self))[1])
    policy = ConnectPolicy()
    policy.REFRESH = 0.0  # stale at every check

    async def round_of_calls() -> list[str | None]:
        # A round's calls, all in flight at once, each checking its address.
        return await asyncio.gather(*(policy("127.0.0.1", 20000 + i, "127.0.0.1") for i in range(200)))

    assert async_to_sync(round_of_calls)() == [None] * 200
    assert len(loads) == 1
    # Stale again: the next calls wait for a reload of their own and judge by what it read.
    League.objects.filter(pk=league.pk).update(allowed_networks="10.0.0.0/8")
    verdicts = async_to_sync(round_of_calls)()
    assert len(loads) == 2
    assert all(v and "outside the league's allowed networks" in v for v in verdicts)
