"""Who may call a relay endpoint: the League Manager, or the referee of a match of that player.

No credential is new: a call proves who sends it with the token the protocol already puts in it
(``auth_token`` in the message, in ``params`` or, for ``tools/call``, in ``params.arguments``; or an
``Authorization: Bearer`` header), checked against what the LM derives itself:

* the League Manager's token for that player (``league.auth.lm_token``: an HMAC of SECRET_KEY, the
  league, the player and its token's hash), which the conductor puts in every message it sends;
* the match token of a match of that player, assigned or running, or finished in the last
  ``FINISHED_GRACE`` seconds (``league.conductor.common.match_token``: an HMAC of SECRET_KEY, the
  league, the match and its attempt), which its referee puts in every message of the match.

Anything else is refused before it reaches the player's socket. What is accepted is kept a few
seconds (``TRUST_LIFE``), so that a match's calls cost no query each.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

from league.auth import lm_token
from league.conductor.common import match_token
from league.models import AgentStatus, Match, Player

LEAGUE_MANAGER = "league_manager"
# A referee's last calls of a match (GAME_OVER) may come just after it reported the result.
FINISHED_GRACE = 120.0
# How long a token once accepted is taken without asking the database again.
TRUST_LIFE = 5.0
# At most this many (player, token) pairs kept; all are forgotten when it fills (they come back).
TRUSTED_MAX = 20_000

_trusted: dict[tuple[str, str, str], tuple[str, float]] = {}


@dataclass(frozen=True)
class Credentials:
    """The tokens that may call a relay player now, each with the name of who holds it."""

    exists: bool
    tokens: dict[str, str]


def presented_token(request: dict[str, Any], bearer: str | None) -> str | None:
    """The token a JSON-RPC request carries: its message's ``auth_token``, else the Bearer header."""
    params = request.get("params")
    message = params.get("arguments") if isinstance(params, dict) and request.get("method") == "tools/call" else params
    token = message.get("auth_token") if isinstance(message, dict) else None
    if isinstance(token, str) and token:
        return token
    return bearer or None


def credentials(league_id: str, player_id: str) -> Credentials:
    """The tokens that may call the relay player ``player_id`` of ``league_id`` now (none, and
    ``exists`` False, when there is no such relay player)."""
    row = (
        Player.objects.filter(league__league_id=league_id, player_id=player_id, connection=Player.Connection.RELAY)
        .exclude(status=AgentStatus.REMOVED)
        .values_list("pk", "token_hash")
        .first()
    )
    if row is None:
        return Credentials(False, {})
    pk, token_hash = row
    tokens = {lm_token(league_id, player_id, token_hash): LEAGUE_MANAGER}
    live = Q(status__in=(Match.Status.ASSIGNED, Match.Status.RUNNING))
    recent = Q(status=Match.Status.FINISHED, finished_at__gte=timezone.now() - timedelta(seconds=FINISHED_GRACE))
    matches = Match.objects.filter(Q(player_a_id=pk) | Q(player_b_id=pk)).filter(live | recent)
    for match_id, attempt in matches.values_list("match_id", "attempt"):
        tokens[match_token(league_id, match_id, attempt)] = f"referee:{match_id}"
    return Credentials(True, tokens)


def trusted(league_id: str, player_id: str, token: str, now: float) -> str | None:
    """Who holds ``token`` for this player, when it was accepted less than TRUST_LIFE ago."""
    held = _trusted.get((league_id, player_id, token))
    return held[0] if held is not None and held[1] > now else None


def holder(found: Credentials, league_id: str, player_id: str, token: str, now: float) -> str | None:
    """Who holds ``token`` among ``found`` (compared in constant time), remembered a while; None: nobody."""
    name = next((n for t, n in found.tokens.items() if hmac.compare_digest(t, token)), None)
    if name is not None:
        if len(_trusted) >= TRUSTED_MAX:
            _trusted.clear()
        _trusted[(league_id, player_id, token)] = (name, now + TRUST_LIFE)
    return name


def forget() -> None:
    """Forget every token accepted (tests; a new league)."""
    _trusted.clear()
