"""Who may call a relay endpoint: the League Manager, or the referee of a match of that player.

No credential is new: a call proves who sends it with the token the protocol already puts in it
(``auth_token`` in the message, in ``params`` or, for ``tools/call``, in ``params.arguments``; or an
``Authorization: Bearer`` header), checked against what the LM derives itself:

* the League Manager's token for that player (``league.auth.lm_token``: an HMAC of SECRET_KEY, the
  league, the player and its token's hash), which the conductor puts in every message it sends;
* that player's own token for a match of its, assigned or running, or finished in the last
  ``FINISHED_GRACE`` seconds (``leagueproto.matchtoken.player_token`` of the match token,
  ``league.conductor.common.match_token``: an HMAC of SECRET_KEY, the league, the match and its
  attempt), which its referee puts in every message of the match to that player. Its opponent is
  sent another, so it cannot call the player through the relay either.

Anything else is refused before it reaches the player's socket. The tokens of a whole league are
read in one query and kept ``TRUST_LIFE`` seconds (``Book``): a round's calls cost a query or two,
not one each, and a read costs what the matches in play cost, not what the finished ones do. A
token not found is looked for again in a read that began after the call came (the match may have
been assigned a moment ago), one read at a time per league however many calls wait.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from channels.db import database_sync_to_async
from django.db.models import Q
from django.utils import timezone

from league.auth import lm_token
from league.conductor.common import match_token
from league.models import AgentStatus, Match, Player
from leagueproto.matchtoken import player_token

LEAGUE_MANAGER = "league_manager"
# A referee's last calls of a match (GAME_OVER) may come just after it reported the result.
FINISHED_GRACE = 120.0
# How long a league's tokens, once read, are taken without reading them again.
TRUST_LIFE = 5.0
# At most this many leagues' books are kept; all are forgotten when it fills (they are read again).
BOOKS_MAX = 1000


@dataclass(frozen=True)
class Credentials:
    """The relay players of a league, and the tokens that may call each: token → [(player, who)]."""

    players: frozenset[str]
    tokens: dict[str, list[tuple[str, str]]]


def presented_token(request: dict[str, Any], bearer: str | None) -> str | None:
    """The token a JSON-RPC request carries: its message's ``auth_token``, else the Bearer header."""
    params = request.get("params")
    message = params.get("arguments") if isinstance(params, dict) and request.get("method") == "tools/call" else params
    token = message.get("auth_token") if isinstance(message, dict) else None
    if isinstance(token, str) and token:
        return token
    return bearer or None


def credentials(league_id: str, *, finished_too: bool = True) -> Credentials:
    """The relay players of ``league_id`` (not removed) and the tokens that may call them now: the
    League Manager's, and the referees' of the matches in play (with ``finished_too``, also of those
    finished in the last ``FINISHED_GRACE`` seconds)."""
    rows = (
        Player.objects.filter(league__league_id=league_id, connection=Player.Connection.RELAY)
        .exclude(status=AgentStatus.REMOVED)
        .values_list("pk", "player_id", "token_hash")
    )
    players = {pk: (player_id, token_hash) for pk, player_id, token_hash in rows}
    tokens: dict[str, list[tuple[str, str]]] = {}
    for player_id, token_hash in players.values():
        tokens.setdefault(lm_token(league_id, player_id, token_hash), []).append((player_id, LEAGUE_MANAGER))
    if players:
        wanted = Q(status__in=(Match.Status.ASSIGNED, Match.Status.RUNNING))
        if finished_too:
            since = timezone.now() - timedelta(seconds=FINISHED_GRACE)
            wanted |= Q(status=Match.Status.FINISHED, finished_at__gte=since)
        theirs = Q(player_a_id__in=players) | Q(player_b_id__in=players)
        matches = Match.objects.filter(league__league_id=league_id).filter(theirs).filter(wanted)
        for match_id, attempt, a, b in matches.values_list("match_id", "attempt", "player_a_id", "player_b_id"):
            secret = match_token(league_id, match_id, attempt)
            for pk in (a, b):
                if pk in players:
                    # The referee calls each player with that player's own token for the match
                    # (leagueproto/matchtoken.py): its opponent does not hold it.
                    mine = player_token(secret, players[pk][0])
                    tokens.setdefault(mine, []).append((players[pk][0], f"referee:{match_id}"))
    return Credentials(frozenset(p for p, _ in players.values()), tokens)


@dataclass
class Book:
    """A league's credentials as last read, and when that read began.

    Only a book's first read looks at finished matches; later ones read the matches in play, and
    a referee's token of a match that has left play is kept ``FINISHED_GRACE`` seconds from the
    read that no longer saw it (``ended``). So a read costs the same at the league's last round as
    at its first, however many matches have finished."""

    found: Credentials = field(default_factory=lambda: Credentials(frozenset(), {}))
    read_at: float = float("-inf")
    reading: asyncio.Future[None] | None = None
    ended: dict[str, tuple[list[tuple[str, str]], float]] = field(default_factory=dict)
    read: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # the last read's own tokens

    def holder(self, player_id: str, token: str) -> str | None:
        """Who holds ``token`` for ``player_id``, or None. (A lookup by the token's keyed hash, as
        league/auth.py looks tokens up: the time it takes tells nothing of a token's characters.)"""
        held = self.found.tokens.get(token, ())
        return next((who for player, who in held if player == player_id), None)

    def update(self, found: Credentials, began: float) -> None:
        """Take a read that began at ``began`` (monotonic), keeping the tokens of matches that
        have just left play for their grace. (Only the tokens of the last read are looked at: the
        cost is the matches in play's, not the kept ones'.)"""
        for token, holders in self.read.items():
            if token not in found.tokens and any(who != LEAGUE_MANAGER for _, who in holders):
                self.ended[token] = (holders, began + FINISHED_GRACE)
        if any(until <= began for _, until in self.ended.values()) or self.found.players != found.players:
            self.ended = {
                token: (holders, until)
                for token, (holders, until) in self.ended.items()
                if until > began and all(p in found.players for p, _ in holders)
            }
        tokens = {token: holders for token, (holders, _) in self.ended.items()}
        tokens.update(found.tokens)
        self.read = found.tokens
        self.found = Credentials(found.players, tokens)
        self.read_at = began


_books: dict[str, Book] = {}
_credentials = database_sync_to_async(credentials)


async def _read(league_id: str, book: Book) -> None:
    began = time.monotonic()
    first = book.read_at == float("-inf")
    book.update(await _credentials(league_id, finished_too=first), began)


async def _fresh(league_id: str, book: Book, since: float) -> None:
    """Until ``book`` holds a read that began at ``since`` or later: one read at a time."""
    while book.read_at < since:
        if book.reading is None or book.reading.done():
            book.reading = asyncio.ensure_future(_read(league_id, book))
        # Shielded: a caller that hangs up does not cancel the read the others wait for.
        await asyncio.shield(book.reading)


async def caller_of(league_id: str, player_id: str, token: str | None) -> str | None:
    """Who calls the relay player ``player_id`` of ``league_id`` with ``token``: "" when the token
    is not one that may call it; None when there is no such relay player."""
    book = _books.get(league_id)
    if book is None:
        if len(_books) >= BOOKS_MAX:
            _books.clear()
        book = _books[league_id] = Book()
    arrived = time.monotonic()
    if arrived - book.read_at < TRUST_LIFE:
        who = book.holder(player_id, token) if token else None
        if who is not None:
            return who
    await _fresh(league_id, book, arrived)
    if player_id not in book.found.players:
        return None
    return (book.holder(player_id, token) if token else None) or ""


def forget() -> None:
    """Forget every league's credentials (they are read again at the next call)."""
    _books.clear()
