"""Calling a relay endpoint as the League Manager does: with its token for that player."""

from __future__ import annotations

from urllib.parse import urlsplit

from league.auth import lm_token_for
from league.models import Player
from league.relayaddress import RELAY_PATH


def lm_headers(endpoint: str) -> dict[str, str]:
    """The League Manager's credential for the relay player of ``endpoint`` (the token the
    conductor puts in its messages), as a header; none when there is no such player."""
    found = RELAY_PATH.match(urlsplit(endpoint).path)
    player = (
        Player.objects.select_related("league").filter(league__league_id=found[1], player_id=found[2]).first()
        if found
        else None
    )
    return {"Authorization": f"Bearer {lm_token_for(player)}"} if player is not None else {}
