"""The LM's tools (docs/protocol.md): one handler each. A handler authenticates the caller,
does the action (league/actions/, league/queries.py) and writes the exchange to the Event
log, in one database job; a refusal is answered and logged the same way.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from league import queries
from league.auth import Identity, authenticate
from league.mcp.database import database_job
from league.mcp.exchange import log_exchange
from league.mcp.messages import (
    GetStandings,
    LeagueQuery,
    LeagueQueryReply,
    MatchResultAck,
    MatchResultReport,
    RegisterPlayerReply,
    RegisterPlayerRequest,
    RegisterRefereeReply,
    RegisterRefereeRequest,
    StandingsReply,
)
from league.mcp.registrations import PendingRegistration, RegistrationQueue
from league.mcp.reports import REPORT_ROLE, PendingReport, ReportQueue
from league.mcp.toolset import ToolCall, toolset
from league.models import League
from league.relayaddress import lm_base_url
from leagueproto.errors import MISSING, ErrorCode, LeagueError, refusal, see
from leagueproto.messages import LeagueList
from leagueproto.tools import Tool


# -- registration -------------------------------------------------------------------------------
@toolset.tool(
    "register_player",
    RegisterPlayerRequest,
    message_types=("LEAGUE_REGISTER_REQUEST",),
    description="Join a league as a player; returns your player_id and auth_token (shown once).",
    output=RegisterPlayerReply,
    see=see("registering"),
)
async def register_player(msg: RegisterPlayerRequest, call: ToolCall) -> dict[str, Any]:
    """Judged and logged with the registrations that arrive beside it, in one batch
    (league/mcp/registrations.py)."""
    assert call.tool is not None
    # The LM's own address, for a player that answers over the relay (contact_endpoint "connect").
    relay_base = lm_base_url(call.headers, call.local_port)
    pending = PendingRegistration(call.tool, call.arguments, msg, call.bearer_token, relay_base, call.client_host)
    return await RegistrationQueue.current().submit(pending)


@toolset.tool(
    "register_referee",
    RegisterRefereeRequest,
    message_types=("REFEREE_REGISTER_REQUEST",),
    description="Join a league as a referee; returns your referee_id and auth_token (shown once).",
    output=RegisterRefereeReply,
    see=see("registering"),
)
async def register_referee(msg: RegisterRefereeRequest, call: ToolCall) -> dict[str, Any]:
    assert call.tool is not None
    pending = PendingRegistration(call.tool, call.arguments, msg, call.bearer_token, None, call.client_host)
    return await RegistrationQueue.current().submit(pending)


# -- reports ------------------------------------------------------------------------------------
@toolset.tool(
    "report_match_result",
    MatchResultReport,
    message_types=("MATCH_RESULT_REPORT",),
    auth=REPORT_ROLE,
    description="The assigned referee reports a match result (idempotent: a repeat is DUPLICATE).",
    output=MatchResultAck,
    see=see("reporting-a-result-referees"),
)
async def report_match_result(msg: MatchResultReport, call: ToolCall) -> dict[str, Any]:
    """Authenticated, recorded and logged with the reports that arrive beside it, in one batch
    (league/mcp/reports.py)."""
    assert call.tool is not None
    reply, _ = await ReportQueue.current().submit(PendingReport(call.tool, call.arguments, msg, call.bearer_token))
    return reply


# -- reads --------------------------------------------------------------------------------------
@toolset.tool(
    "league_query",
    LeagueQuery,
    aliases=("handle_league_query",),
    message_types=("LEAGUE_QUERY",),
    auth="agent",
    description="Ask the league: GET_STANDINGS, GET_SCHEDULE, GET_NEXT_MATCH, GET_PLAYER_STATS, GET_MATCH_ASSIGNMENT.",
    output=LeagueQueryReply,
    see=see("asking-the-league"),
)
async def league_query(msg: LeagueQuery, call: ToolCall) -> dict[str, Any]:
    return (await database_job(read, call.tool, call.arguments, msg, call.bearer_token))[0]


@toolset.tool(
    "get_standings",
    GetStandings,
    envelope=False,
    description="Current standings of a league (public; league_id optional).",
    output=StandingsReply,
    see=see("asking-the-league"),
)
async def get_standings(msg: GetStandings, call: ToolCall) -> dict[str, Any]:
    return (await database_job(read, call.tool, call.arguments, msg, call.bearer_token))[0]


def read(tool: Tool, arguments: dict[str, Any], msg: BaseModel, bearer: str | None) -> tuple[dict, bool]:
    """A read tool's call in one job: authenticate (when the tool needs it) and answer. Only a
    caller whose token is proven has the exchange logged (``READ_TOOLS``): an anonymous read,
    answered or refused, writes nothing."""
    identity = league = None
    try:
        if tool.auth:
            identity = authenticate(tool.auth, arguments, bearer)
        if isinstance(msg, LeagueQuery):
            assert identity is not None
            reply, league, is_error = _query_reply(msg, identity), identity.league, False
        else:
            assert isinstance(msg, GetStandings)
            league = queries.get_league(msg.league_id)
            reply, is_error = toolset.reply(msg, "LEAGUE_STANDINGS", **standings_of(league)), False
    except LeagueError as err:
        reply, is_error = toolset.error_reply(err, arguments, tool), True
    if identity is not None:
        log_exchange(tool, arguments, reply, identity, league.pk if league else None)
    return reply, is_error


def _query_reply(msg: LeagueQuery, identity: Identity) -> dict[str, Any]:
    return toolset.reply(
        msg,
        "LEAGUE_QUERY_RESPONSE",
        league_id=identity.league.league_id,
        query_type=msg.query_type,
        success=True,
        data=_run_query(identity, msg.query_type, msg.query_params),
    )


def _run_query(identity: Identity, query_type: str, params: dict[str, Any]) -> dict[str, Any]:
    league = identity.league
    if query_type == "GET_STANDINGS":
        return {"round_id": league.current_round, "standings": queries.standings(league, just_read=True)}
    if query_type == "GET_SCHEDULE":
        round_id = params.get("round_id")
        if isinstance(round_id, str) and round_id.strip().isdigit():
            round_id = int(round_id)  # "1" or 1, as agents write it
        if round_id is not None and (not isinstance(round_id, int) or isinstance(round_id, bool)):
            raise refusal(
                ErrorCode.INVALID_MESSAGE_FORMAT,
                "query_params.round_id",
                "a round number, e.g. 1 (or leave it out for every round)",
                round_id,
                see("asking-the-league"),
            )
        player_id = params.get("player_id")
        return {"rounds": queries.schedule(league, round_id=round_id, player_id=player_id)}
    if query_type == "GET_MATCH_ASSIGNMENT":
        return _match_assignment(identity, params.get("match_id"))
    player_id = params.get("player_id")
    if identity.kind == "player":
        if player_id not in (None, identity.agent_id):
            raise LeagueError(
                ErrorCode.AUTH_TOKEN_INVALID,
                f"a player may ask {query_type} only about itself ({identity.agent_id})",
                context={"player_id": player_id},
            )
        player_id = identity.agent_id
    elif not isinstance(player_id, str) or not player_id:
        raise LeagueError(
            ErrorCode.MISSING_REQUIRED_FIELD,
            f"{query_type} needs query_params.player_id",
            context={"missing_fields": ["query_params.player_id"]},
        )
    # A player asks about itself: its row is the identity's (no second lookup).
    player = identity.agent if identity.kind == "player" else None
    if query_type == "GET_NEXT_MATCH":
        return {"player_id": player_id, "next_match": queries.next_match(league, player_id, player)}
    return queries.player_stats(league, player_id, player)


def _match_assignment(identity: Identity, match_id: Any) -> dict[str, Any]:
    """GET_MATCH_ASSIGNMENT: a player asks who referees one of its matches (E012 for anyone else)."""
    if identity.kind != "player":
        raise LeagueError(ErrorCode.AUTH_TOKEN_INVALID, "only a player of the match may ask GET_MATCH_ASSIGNMENT")
    if not isinstance(match_id, str) or not match_id:
        raise refusal(
            ErrorCode.MISSING_REQUIRED_FIELD,
            "query_params.match_id",
            "the match_id of one of your matches, e.g. R1M1",
            match_id if match_id is not None else MISSING,
            see("whom-to-trust"),
        )
    return queries.match_assignment(identity.league, identity.agent, match_id)


def standings_of(league: League) -> dict[str, Any]:
    """The standings answer's fields (the get_standings tool and the standings resources), for a
    ``league`` row read for this answer."""
    return {
        "league_id": league.league_id,
        "status": league.status,
        "round_id": league.current_round,
        "standings": queries.standings(league, just_read=True),
    }


@toolset.tool(
    "list_leagues",
    GetStandings,
    envelope=False,
    description="The leagues open for registration or in play (public): referees poll it to serve each.",
    output=LeagueList,
    see=see("referee-side"),
)
async def list_leagues(msg: GetStandings, call: ToolCall) -> dict[str, Any]:
    """Polled by every referee every few seconds: a read, not logged (league/mcp/exchange.py)."""
    return toolset.reply(msg, "LEAGUE_LIST", leagues=await database_job(_league_summaries))


def _league_summaries() -> list[dict[str, Any]]:
    rows = League.objects.filter(status__in=queries.ACTIVE_STATUSES).order_by("created_at", "pk")
    return [
        {
            "league_id": league_id,
            "status": status,
            "game_type": game_type,
            "registration_closes_at": closes.isoformat().replace("+00:00", "Z") if closes else None,
        }
        for league_id, status, game_type, closes in rows.values_list(
            "league_id", "status", "game_type", "registration_closes_at"
        )
    ]
