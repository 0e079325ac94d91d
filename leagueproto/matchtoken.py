"""Each player's own token for a match, derived from the match token the League Manager gives
the referee.

The LM makes one ``match_token`` per match attempt and sends it only to the referee (START_MATCH).
The referee never shows it to a player: each player gets ``player_token(match_token, player_id)``
in its GAME_INVITATION and every later call of the match, and the referee takes an answer only
with that player's token. So the opponent holds a token the victim does not accept: it cannot
call the victim's ``choose_parity`` to learn its choice, nor send it a GAME_OVER of its own.

The LM answers a player's GET_MATCH_ASSIGNMENT with ``token_digest`` of that player's own token,
so a player can confirm a reassignment without anyone learning a token (league/queries.py).
The referee (referee/runner.py) and the LM both derive here; players never need to: a player
keeps whatever token its invitation carried.
"""

from __future__ import annotations

import hashlib
import hmac


def player_token(match_token: str, player_id: str) -> str:
    """The token of ``player_id`` in the match whose token is ``match_token``: HMAC-SHA256 keyed by
    the match token over the player's id, in hex (64 characters). One way: a player's token tells
    nothing of the match token or of its opponent's token."""
    return hmac.new(match_token.encode(), player_id.encode(), hashlib.sha256).hexdigest()


def token_digest(token: str) -> str:
    """The SHA-256 of ``token`` in hex: what the LM shows a player to confirm a token it holds."""
    return hashlib.sha256(token.encode()).hexdigest()
