"""The LM's MCP resources: standings, schedule and match state, read-only and public."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from league import queries
from league.mcp.database import database_job
from league.mcp.tools import standings_of
from league.mcp.toolset import toolset
from leagueproto.errors import LeagueError


def _resource(read: Callable[..., Any]) -> Callable[[str, dict[str, str]], Awaitable[Any]]:
    """Run a sync reader; an unknown league or match becomes 'resource not found'."""

    async def reader(uri: str, params: dict[str, str]) -> Any:
        try:
            return await database_job(read, **params)
        except LeagueError as exc:
            raise LookupError(exc.description) from exc

    return reader


def _standings_payload(league_id: str | None = None) -> dict[str, Any]:
    return standings_of(queries.get_league(league_id))


def _schedule_payload(league_id: str | None = None) -> dict[str, Any]:
    league = queries.get_league(league_id)
    return {"league_id": league.league_id, "status": league.status, "rounds": queries.schedule(league)}


def _state_payload(match_id: str, league_id: str | None = None) -> dict[str, Any]:
    return queries.match_state(queries.get_league(league_id), match_id)


toolset.resource("league://standings", name="League Standings", description="Standings of the league in progress")(
    _resource(_standings_payload)
)
toolset.resource("league://schedule", name="League Schedule", description="Rounds and matches with their status")(
    _resource(_schedule_payload)
)
toolset.resource("game://state/{match_id}", name="Match State", description="One match of the league in progress")(
    _resource(_state_payload)
)
toolset.resource("league://{league_id}/standings", name="Standings of a league")(_resource(_standings_payload))
toolset.resource("league://{league_id}/schedule", name="Schedule of a league")(_resource(_schedule_payload))
toolset.resource("game://state/{league_id}/{match_id}", name="Match state in a league")(_resource(_state_payload))
