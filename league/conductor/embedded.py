"""The LM's built-in referee, for a league that asks for it and has no live referee.

It is the real referee runner (``referee.runner.MatchRunner``) called in-process, and its result
goes through ``actions.record_results`` like any referee's report: the built-in referee is a
``Referee`` with no row (pk None), which is exactly what its matches record as their referee
(none), so the usual assignment check holds. A match a registered referee holds meanwhile
refuses it (E015), as it refuses any referee but its own.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone

from league import actions
from league.conductor.common import EMBEDDED_REFEREE, match_token, retry_policy, timeouts_of
from league.conductor.dispatch import NO_RECORD, records_before, release_match, scheduled_matches
from league.conductor.reachability import decide_unreachable
from league.events import append_events, broadcast_all, event_values
from league.models import League, Match, Referee
from leagueproto.client import AgentClient
from leagueproto.errors import LeagueError
from leagueproto.timeouts import Timeouts

# league/ may use the referee's pure runner for this built-in mode (referee/ never imports league/).
from referee.games import get_game
from referee.runner import MatchAbandoned, MatchRunner, MatchSpec, Seat

log = logging.getLogger("league.conductor")


@dataclass(frozen=True)
class EmbeddedMatch:
    """A match claimed for the built-in referee: its row and what the runner is told."""

    pk: int
    attempt: int
    spec: MatchSpec


def claim_embedded(league_pk: int, round_pk: int, capacity: int) -> list[EmbeddedMatch]:
    """Claim up to ``capacity`` SCHEDULED matches for the built-in referee (RUNNING, no referee)."""
    if capacity <= 0:
        return []
    with transaction.atomic():
        decide_unreachable(round_pk)
        league = League.objects.get(pk=league_pk)
        matches = list(scheduled_matches(round_pk).select_related("round", "player_a", "player_b")[:capacity])
        if not matches:
            return []
        now = timezone.now()
        deadline = now + timedelta(seconds=league.match_deadline)
        records = records_before(matches[0].round, (p.player_id for m in matches for p in (m.player_a, m.player_b)))
        claimed, events, news = [], [], []
        for match in matches:
            match.status, match.referee, match.attempt = Match.Status.RUNNING, None, match.attempt + 1
            match.assigned_at, match.deadline_at = now, deadline
            a, b = match.player_a, match.player_b
            spec = MatchSpec(
                league_id=league.league_id,
                round_id=match.round.number,
                match_id=match.match_id,
                game_type=match.game_type,
                player_a=Seat(a.player_id, a.endpoint),
                player_b=Seat(b.player_id, b.endpoint),
                match_token=match_token(league.league_id, match.match_id, match.attempt),
                timeouts=Timeouts.from_mapping(timeouts_of(league)),
                retry=retry_policy(league),
                max_invalid_moves=league.max_invalid_moves,
                standings={p.player_id: dict(records.get(p.player_id, NO_RECORD)) for p in (a, b)},
            )
            claimed.append(EmbeddedMatch(match.pk, match.attempt, spec))
            events.append(
                event_values(
                    league,
                    "STATE",
                    "match_started",
                    agent=EMBEDDED_REFEREE,
                    match_id=match.match_id,
                    payload={"attempt": match.attempt, "embedded": True},
                )
            )
            news.append(
                (
                    league.league_id,
                    "match_started",
                    {
                        "match_id": match.match_id,
                        "round_id": match.round.number,
                        "referee_id": EMBEDDED_REFEREE,
                        "attempt": match.attempt,
                        "player_A_id": a.player_id,
                        "player_B_id": b.player_id,
                    },
                )
            )
        Match.objects.bulk_update(matches, ["status", "referee", "attempt", "assigned_at", "deadline_at"])
        append_events(events)
        broadcast_all(news)
    return claimed


def record_embedded(league: League, match_id: str, result: dict[str, Any], match_log: list[Any]) -> bool:
    """The built-in referee's report, recorded as any referee's is; whether it was."""
    referee = Referee(league=league, referee_id=EMBEDDED_REFEREE)  # no row: see the module's docstring
    with transaction.atomic():
        (outcome,), rows = actions.record_results([actions.Report(referee, match_id, result, match_log)])
        append_events(rows)
    if isinstance(outcome, LeagueError):
        log.warning("embedded result of %s not recorded: %s", match_id, outcome)
        return False
    return True


async def play_embedded(client: AgentClient, league: League, match: EmbeddedMatch) -> None:
    """Run one claimed match with the referee's own runner. Its result is recorded before the
    players are told it, as a referee's is (``referee.agent.Referee._commit``): an LM killed in
    between has told no one, and the match is played again."""

    async def commit(runner: MatchRunner) -> bool:
        assert runner.result is not None
        return await sync_to_async(record_embedded)(
            league, match.spec.match_id, runner.result.to_dict(), runner.log.entries
        )

    runner = MatchRunner(
        match.spec, get_game(match.spec.game_type), client, f"referee:{EMBEDDED_REFEREE}", commit=commit
    )
    try:
        await runner.run()
    except MatchAbandoned as exc:
        log.warning("embedded match %s told to no one: %s", match.spec.match_id, exc)
    except Exception:
        log.exception("embedded match %s failed", match.spec.match_id)
        await sync_to_async(release_match)(match.pk, None, match.attempt, "embedded referee crashed")
