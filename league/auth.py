"""Agent tokens and the LM's authentication of incoming calls (docs/protocol.md, "Registering").

A token is shown to its agent once, at registration, and stored only as a SHA-256 hash
(``Agent.token_hash``). Calls are authenticated by looking the hash up and then comparing in
constant time. A token is bound to one agent of one league, and it decides who the caller is:
the ``sender`` may spell the agent as its id (``player:P01``) or as a name (``player:alpha``,
``player:None``), but a sender naming *another* registered agent, or another kind of agent (a
player's token with ``referee:…``), is refused; so is another league's id in ``league_id``.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from league.models import League, Player, Referee, hash_token
from leagueproto.envelope import parse_sender
from leagueproto.errors import MISSING, ErrorCode, LeagueError, refusal, see

SEE_TOKENS = see("registering")
EXPECTED_TOKEN = "the auth_token of your latest registration reply (or an 'Authorization: Bearer' header)"

TOKEN_BYTES = 32  # 256 bits from the OS CSPRNG: no token can be guessed


def new_token() -> tuple[str, str]:
    """A fresh agent token and its hash: ``(token, token_hash)``. Show the token once only."""
    token = secrets.token_urlsafe(TOKEN_BYTES)
    while token.startswith("-"):  # one in 64: a command line would read it as an option (--key -x…)
        token = secrets.token_urlsafe(TOKEN_BYTES)
    return token, hash_token(token)


def lm_token(league_id: str, agent_id: str, token_hash: str) -> str:
    """The token the LM puts in messages it sends to an agent.

    Derived, not stored: HMAC-SHA256(SECRET_KEY, "league:agent:token_hash"), so it changes when
    the agent's own token does and an agent can check it against the ``league_manager_token`` it
    got at registration.
    """
    return _lm_token(settings.SECRET_KEY, league_id, agent_id, token_hash)


@functools.lru_cache(maxsize=4096)
def _lm_token(secret_key: str, league_id: str, agent_id: str, token_hash: str) -> str:
    # Kept: each round boundary needs every player's, one HMAC each (100 a round of 100 players).
    return hmac.new(secret_key.encode(), f"{league_id}:{agent_id}:{token_hash}".encode(), hashlib.sha256).hexdigest()


def lm_token_for(agent: Player | Referee) -> str:
    agent_id = agent.player_id if isinstance(agent, Player) else agent.referee_id
    return lm_token(agent.league.league_id, agent_id, agent.token_hash)


@dataclass(frozen=True)
class Identity:
    """Who an authenticated call comes from."""

    kind: str  # "player" or "referee"
    agent: Player | Referee
    league: League

    @property
    def agent_id(self) -> str:
        return self.agent.player_id if isinstance(self.agent, Player) else self.agent.referee_id


def presented_token(message: dict[str, Any], bearer: str | None) -> str | None:
    """The token of a call: ``auth_token`` in the message, else an ``Authorization: Bearer`` header."""
    token = message.get("auth_token")
    if isinstance(token, str) and token:
        return token
    return bearer or None


def find_by_token(token: str, kind: str, *, previous: bool = False) -> Player | Referee | None:
    """The agent of ``kind`` whose token this is (hash lookup + constant-time confirmation).
    ``previous``: whose token before its latest rotation this is (good only for registering
    again: the reply carrying the new one may have been lost)."""
    digest = hash_token(token)
    model = Player if kind == "player" else Referee
    if previous:
        agent = model.objects.select_related("league").filter(previous_token_hash=digest).order_by().first()
        held = agent.previous_token_hash if agent is not None else ""
    else:
        agent = model.objects.holding([digest]).first()
        held = agent.token_hash if agent is not None else ""
    if agent is None or not hmac.compare_digest(held, digest):
        return None
    return agent


def authenticate(role: str, message: dict[str, Any], bearer: str | None) -> Identity:
    """Authenticate a call to a tool that needs ``role`` ("referee" or "agent" = player or referee).

    E011 no token; E013/E005 the sender names no registered referee/player; E012 the token is
    unknown, belongs to another agent or league, or is a player's token on a referee-only tool.
    """
    (outcome,) = authenticate_many(role, [(message, bearer)])
    if isinstance(outcome, LeagueError):
        raise outcome
    return outcome


def authenticate_many(role: str, calls: list[tuple[dict[str, Any], str | None]]) -> list[Identity | LeagueError]:
    """``authenticate`` for several calls at once: each call's Identity or its LeagueError, in order.

    The common case (every token is its sender's own) is one query per kind of agent for all the
    calls together (``token_hash IN (...)``); only a failing call costs a query of its own.
    """
    outcomes: list[Identity | LeagueError | None] = [None] * len(calls)
    wanted: dict[str, list[tuple[int, str, str, str | None, str]]] = {"player": [], "referee": []}
    for n, (message, bearer) in enumerate(calls):
        try:
            kind, agent_id, league_id, token = _claim(role, message, bearer)
        except LeagueError as err:
            outcomes[n] = err
            continue
        wanted[kind].append((n, agent_id, league_id, token, hash_token(token)))
    for kind, claims in wanted.items():
        if not claims:
            continue
        model = Player if kind == "player" else Referee
        id_field = "player_id" if kind == "player" else "referee_id"
        agents = model.objects.holding({digest for *_, digest in claims})
        found = {agent.token_hash: agent for agent in agents}
        for n, agent_id, league_id, _token, digest in claims:
            message = calls[n][0]
            agent = found.get(digest)
            if (
                agent is not None
                and hmac.compare_digest(agent.token_hash, digest)
                and (not league_id or agent.league.league_id == league_id)
            ):
                own_id = getattr(agent, id_field)
                try:
                    # The token decides who calls; a sender spelling its own name or id is fine,
                    # one naming another agent of the league is not (one query, only then).
                    if (
                        agent_id != own_id
                        and model.objects.filter(league_id=agent.league_id, **{id_field: agent_id}).exists()
                    ):
                        raise _impersonation(kind, own_id, message)
                    outcomes[n] = _checked(kind, own_id, agent, message)
                    if agent.previous_token_hash:
                        # The new token is in use, so its reply arrived: the one before it retires.
                        model.objects.filter(pk=agent.pk).update(previous_token_hash="")
                except LeagueError as err:
                    outcomes[n] = err
            else:
                outcomes[n] = _refusal(kind, agent_id, league_id, message, calls[n][1])
    return outcomes  # type: ignore[return-value]  # every slot is filled above


def _claim(role: str, message: dict[str, Any], bearer: str | None) -> tuple[str, str, str | None, str]:
    """What a call claims before any lookup: ``(kind, agent_id, league_id, token)``; E011/E012 when
    it cannot be right whatever the database says."""
    token = presented_token(message, bearer)
    if not token:
        raise refusal(
            ErrorCode.AUTH_TOKEN_MISSING,
            "auth_token",
            EXPECTED_TOKEN,
            message.get("auth_token", MISSING),
            SEE_TOKENS,
            problem="auth_token is required: send the token you got at registration",
        )
    sender = message.get("sender", "")
    kind, agent_id = parse_sender(sender)
    league_id = message.get("league_id") if isinstance(message.get("league_id"), str) else None
    if kind == "league_manager":
        raise refusal(
            ErrorCode.AUTH_TOKEN_INVALID,
            "sender",
            "'player:<your id or name>' or 'referee:<your id or name>'",
            sender,
            SEE_TOKENS,
            problem="only players and referees call the League Manager",
        )
    if role == "referee" and kind != "referee":
        raise refusal(
            ErrorCode.AUTH_TOKEN_INVALID,
            "sender",
            "'referee:<your id>': only the referee assigned to a match may call this tool; players may not",
            sender,
            see("reporting-a-result-referees"),
        )
    return kind, agent_id or "", league_id, token


def _impersonation(kind: str, own_id: str, message: dict[str, Any]) -> LeagueError:
    return refusal(
        ErrorCode.AUTH_TOKEN_INVALID,
        "sender",
        f"'{kind}:{own_id}' (the agent this token belongs to) or your own name",
        message.get("sender"),
        SEE_TOKENS,
        problem=f"the sender names another registered {kind}; this token is {own_id}'s",
    )


def _refusal(
    kind: str, agent_id: str, league_id: str | None, message: dict[str, Any], bearer: str | None
) -> LeagueError:
    """Why a token was not accepted for its sender: E012 when it is another kind of agent's token
    or it belongs elsewhere; E005/E013 when it is unknown and the sender names no registered agent."""
    sender = message["sender"]
    other_kind = "referee" if kind == "player" else "player"
    other = find_by_token(presented_token(message, bearer) or "", other_kind)
    if other is not None:
        other_id = other.player_id if isinstance(other, Player) else other.referee_id
        return refusal(
            ErrorCode.AUTH_TOKEN_INVALID,
            "sender",
            f"'{other_kind}:{other_id}': this token belongs to a {other_kind}, not a {kind}",
            sender,
            SEE_TOKENS,
        )
    model = Player if kind == "player" else Referee
    id_field = "player_id" if kind == "player" else "referee_id"
    known = model.objects.filter(**{id_field: agent_id})
    if league_id:
        known = known.filter(league__league_id=league_id)
    if not known.exists():
        code = ErrorCode.PLAYER_NOT_REGISTERED if kind == "player" else ErrorCode.REFEREE_NOT_REGISTERED
        where = f" in league {league_id}" if league_id else ""
        return refusal(
            code,
            "auth_token",
            EXPECTED_TOKEN,
            "a token this league does not know",
            SEE_TOKENS,
            problem=f"{kind} {agent_id} is not registered{where} (register again)",
            sender=sender,
        )
    return refusal(
        ErrorCode.AUTH_TOKEN_INVALID,
        "auth_token",
        EXPECTED_TOKEN,
        "a token that is not valid here",
        SEE_TOKENS,
        problem=f"auth_token is not valid for sender {sender}" + (f" in league {league_id}" if league_id else ""),
        sender=sender,
    )


def _checked(kind: str, agent_id: str, agent: Player | Referee, message: dict[str, Any]) -> Identity:
    if agent.status in ("SUSPENDED", "REMOVED"):
        raise LeagueError(
            ErrorCode.AUTH_TOKEN_INVALID,
            f"{kind} {agent_id} is {agent.status.lower()} in league {agent.league.league_id}",
            context={"sender": message["sender"], "status": agent.status, "see": SEE_TOKENS},
        )
    return Identity(kind=kind, agent=agent, league=agent.league)
