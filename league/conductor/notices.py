"""What the players are told, and when: recipients, round announcements, a round's boundary
(standings, ROUND_COMPLETED, the next announcement), and the league's end.

Notifications are sent at least once (see ``league.conductor.transitions`` for when again) and
never block the league: a player marked unreachable is left out until it answers a probe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from league import standings
from league.auth import lm_token
from league.conductor.common import SENDER, Delivery, message_to, players_of
from league.conductor.dispatch import expected_referees
from league.models import AgentStatus, League, Match, Player, Referee, Round
from league.senders import sender_for
from leagueproto.envelope import make_message, new_conversation_ids
from leagueproto.jsonutil import dumps
from leagueproto.scoring import id_sort_key


@dataclass(frozen=True, slots=True)
class Recipient:
    """A player as a round's notifications need it: no model instance (and no League per row)."""

    agent_id: str
    endpoint: str
    lm_token: str
    reachable: bool = True  # False: marked unreachable, sent nothing until it answers a probe
    sender: str = SENDER  # how the LM names itself to this player (league/senders.py)


def recipients(league: League) -> list[Recipient]:
    """The players of ``players_of`` (not REMOVED, in id order), from one query of a few columns."""
    rows = (
        Player.objects.filter(league_id=league.pk)
        .exclude(status=AgentStatus.REMOVED)
        .order_by()
        .values_list("player_id", "endpoint", "token_hash", "unreachable_since", "lm_sender")
    )
    found = [
        Recipient(
            player_id,
            endpoint,
            lm_token(league.league_id, player_id, token_hash),
            unreachable_since is None,
            sender_for(lm_sender),
        )
        for player_id, endpoint, token_hash, unreachable_since, lm_sender in rows
    ]
    return sorted(found, key=lambda r: id_sort_key(r.agent_id))


def notices(players: list[Recipient], method: str, message_type: str, **fields: Any) -> list[Delivery]:
    """The same message to every player, each with its own envelope (token, conversation id);
    ``fields`` (e.g. a round's standings) are shared, not copied. Players marked unreachable are
    left out (the same ones from every batch built from the same list: batches stay aligned)."""
    players = [p for p in players if p.reachable]
    ids = new_conversation_ids(len(players))
    return [
        Delivery(
            p.agent_id,
            p.endpoint,
            method,
            make_message(message_type, p.sender, conversation_id=cid, auth_token=p.lm_token, **fields),
        )
        for p, cid in zip(players, ids, strict=True)
    ]


def round_matches(rnd: Round) -> list[dict[str, Any]]:
    """The round's matches as ROUND_ANNOUNCEMENT lists them (in id order), each with the
    ``referee_endpoint`` the course's announcement carries: its referee's, once assigned, else the
    one it is expected to get (``expected_referees``)."""
    rows = list(
        Match.objects.filter(round_id=rnd.pk)
        .order_by("id")
        .values_list("match_id", "game_type", "player_a__player_id", "player_b__player_id", "referee__endpoint")
    )
    expected = iter(expected_referees(rnd.league_id, sum(1 for row in rows if row[4] is None)))
    return [
        {
            "match_id": match_id,
            "game_type": game_type,
            "player_A_id": a,
            "player_B_id": b,
            "referee_endpoint": endpoint if endpoint is not None else next(expected),
        }
        for match_id, game_type, a, b, endpoint in rows
    ]


def announcement(
    league: League,
    rnd: Round,
    matches: list[dict[str, Any]] | None = None,
    players: list[Recipient] | None = None,
) -> list[Delivery]:
    """ROUND_ANNOUNCEMENT of ``rnd`` to every player (``players``: the recipients, if the caller has them)."""
    if matches is None:
        matches = round_matches(rnd)
    fields = {"league_id": league.league_id, "round_id": rnd.number, "matches": matches}
    return notices(
        players if players is not None else recipients(league), "notify_round", "ROUND_ANNOUNCEMENT", **fields
    )


def next_round_after(league_pk: int, number: int) -> Round | None:
    return Round.objects.filter(league_id=league_pk, number__gt=number).order_by("number").first()


def finished_in_round(round_pk: int) -> int:
    return Match.objects.filter(round_id=round_pk, status=Match.Status.FINISHED).count()


@dataclass
class Boundary:
    """What the end of a round sends: each player's LEAGUE_STANDINGS_UPDATE and ROUND_COMPLETED
    and, when the next round follows at once (no ``round_pause``), its ROUND_ANNOUNCEMENT, all
    in the same player order (``send_in_order`` pairs them by position)."""

    updates: list[Delivery]
    completed: list[Delivery]
    table: list[dict[str, Any]]
    upcoming: Round | None = None  # the next round, announced in the same delivery phase
    announcements: list[Delivery] = field(default_factory=list)
    matches: list[dict[str, Any]] | None = None  # the next round's ``round_matches``

    @property
    def batches(self) -> list[list[Delivery]]:
        """What each player gets, in order, for ``send_in_order`` (no announcements: left out)."""
        return [self.updates, self.completed, self.announcements]


def round_boundary(league: League, rnd: Round, *, again: bool = False) -> Boundary:
    """What the end of ``rnd`` sends. ``again``: the boundary is owed (``owed_round``) and sent
    once more, with the next round's announcement although that round is under way."""
    players = recipients(league)
    table = standings.standings(league)
    nxt = next_round_after(league.pk, rnd.number)
    finished = finished_in_round(rnd.pk)
    round_fields = {"league_id": league.league_id, "round_id": rnd.number}
    # Serialised once for every player's LEAGUE_STANDINGS_UPDATE (and the Event row that keeps
    # the body): orjson writes a Fragment as it is, where a table in each of 100 messages would
    # be serialised 100 times.
    shared = orjson.Fragment(dumps(table))
    updates = notices(players, "update_standings", "LEAGUE_STANDINGS_UPDATE", **round_fields, standings=shared)
    completed = notices(
        players,
        "notify_round_completed",
        "ROUND_COMPLETED",
        **round_fields,
        # matches_played is the course's name for it; matches_completed stays for agents that read it.
        matches_played=finished,
        matches_completed=finished,
        next_round_id=nxt.number if nxt else None,
    )
    boundary = Boundary(updates, completed, table)
    # Without a pause between rounds nothing happens between ROUND_COMPLETED(r) and
    # ROUND_ANNOUNCEMENT(r+1): one delivery phase (and one trip to record it) for both.
    if nxt is not None and (again or (nxt.status == Round.Status.PENDING and league.round_pause <= 0)):
        boundary.upcoming, boundary.matches = nxt, round_matches(nxt)
        boundary.announcements = announcement(league, nxt, boundary.matches, players)
    return boundary


def end_fields(league: League) -> tuple[dict[str, Any], dict[str, Any] | None, list[dict[str, Any]]]:
    """LEAGUE_COMPLETED's fields as the league stands (its champion: the table's first), the
    champion and the table."""
    table = standings.standings(league)
    champion = None
    if table:
        top = table[0]
        champion = {"player_id": top["player_id"], "display_name": top["display_name"], "points": top["points"]}
    fields = {
        "league_id": league.league_id,
        "champion": champion,
        "final_standings": table,
        "total_rounds": league.rounds.count(),
        "total_matches": league.matches.filter(status=Match.Status.FINISHED).count(),
    }
    return fields, champion, table


def end_deliveries(league: League, fields: dict[str, Any]) -> list[Delivery]:
    """LEAGUE_COMPLETED with ``fields`` to every player and referee not removed."""
    agents: list[Player | Referee] = [*players_of(league)]
    agents += list(league.referees.exclude(status=AgentStatus.REMOVED).select_related("league").order_by("id"))
    return [
        Delivery(
            a.player_id if isinstance(a, Player) else a.referee_id,
            a.endpoint,
            "notify_league_completed",
            message_to(a, "LEAGUE_COMPLETED", **fields),
        )
        for a in agents
    ]


def league_end_messages(league: League) -> tuple[list[Delivery], dict[str, Any] | None, list[dict[str, Any]]]:
    """LEAGUE_COMPLETED to every player and referee; the champion and the final table."""
    fields, champion, table = end_fields(league)
    return end_deliveries(league, fields), champion, table


def farewell_messages(league: League, league_status: str, reason: str) -> list[Delivery]:
    """What the agents of a league the organiser ends (cancelled, or deleted before it played)
    are told. league.v2 has one end notice, LEAGUE_COMPLETED, so it is that one, with no
    champion, the standings as they are, and two fields that say why: ``league_status``
    (CANCELLED or DELETED) and ``reason``. An agent that stops after LEAGUE_COMPLETED (the
    course's players do) stops now; one that reads the extra fields can say why."""
    fields, _champion, _table = end_fields(league)
    fields.update(champion=None, league_status=league_status, reason=reason)
    return end_deliveries(league, fields)
