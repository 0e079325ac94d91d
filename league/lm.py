"""The League Manager as an agent: its tools, resources and authenticator (docs/protocol.md).

Transport (both dialects, JSON-RPC errors, MCP) is leagueproto's; rules and state changes are in
league/actions.py and league/queries.py. Every tool call is written to the Event log: the message
received and the reply sent, tokens stripped.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, field_validator

from league import actions, queries
from league.auth import Identity, authenticate, authenticate_many, presented_token
from league.events import EventValues, append_events, event_values
from league.models import League, check_league_id
from league.ratelimit import limiter
from leagueproto.errors import ErrorCode, LeagueError, refusal, see
from leagueproto.jsonrpc import JsonRpcError
from leagueproto.jsonutil import dumps
from leagueproto.messages import JsonObjects, LeagueList, LeagueMessage, LeagueReply, RoundNumber
from leagueproto.tools import CallContext, Tool, Toolset

QUERY_TYPES = ("GET_STANDINGS", "GET_SCHEDULE", "GET_NEXT_MATCH", "GET_PLAYER_STATS")
# Strict types: "1" is not 1 and 1 is not "1" (no silent coercion); extra fields stay tolerated.
STRICT = ConfigDict(extra="allow", populate_by_name=True, strict=True)
# What a summarised Event payload keeps (league/lm.py ``capped``).
SUMMARY_FIELDS = ("protocol", "message_type", "sender", "timestamp", "conversation_id", "league_id", "match_id")
GameType = Annotated[str, StringConstraints(min_length=1, max_length=32)]
LeagueId = Annotated[str, StringConstraints(max_length=64), AfterValidator(check_league_id)]  # the one id rule


# -- message models (they also generate each tool's inputSchema) ---------------------------------
class PlayerMeta(BaseModel):
    model_config = STRICT

    display_name: str = Field(min_length=1, max_length=100, description="Shown in standings.")
    version: str = Field("", max_length=32, description="Your agent's version.")
    protocol_version: str | None = Field(
        None, description="Optional: the league protocol version you speak; when given, at least 2.0.0 (e.g. '2.1.0')."
    )
    game_types: list[GameType] | None = Field(
        None, max_length=16, description="Games you can play, e.g. ['even_odd'] (left out: the league's game)."
    )
    contact_endpoint: str = Field(max_length=500, description="Your POST /mcp URL, e.g. http://127.0.0.1:8101/mcp.")


class RefereeMeta(BaseModel):
    model_config = STRICT

    display_name: str = Field(min_length=1, max_length=100)
    version: str = Field("", max_length=32)
    protocol_version: str | None = Field(None, description="Optional; when given, at least 2.0.0.")
    game_types: list[GameType] = Field(
        max_length=16, description="Games you can referee, e.g. ['even_odd', 'even_odd_bo5']."
    )
    contact_endpoint: str = Field(max_length=500, description="Your POST /mcp URL.")
    max_concurrent_matches: int = Field(2, ge=1, le=10_000, description="Matches you run at once.")


class RegisterPlayerRequest(LeagueMessage):
    """LEAGUE_REGISTER_REQUEST."""

    model_config = STRICT

    league_id: LeagueId | None = Field(None, description="Omit to join the one league open for registration.")
    player_meta: PlayerMeta


class RegisterRefereeRequest(LeagueMessage):
    """REFEREE_REGISTER_REQUEST."""

    model_config = STRICT

    league_id: LeagueId | None = Field(None, description="Omit to join the one league open for registration.")
    referee_meta: RefereeMeta


class ReportedResult(BaseModel):
    model_config = STRICT

    status: Literal["WIN", "DRAW", "TECHNICAL_LOSS"]
    winner: str | None = None
    score: dict[str, int] = Field(description="Points per player: win 3/0, draw 1/1, technical loss 3/0 or 0/0.")
    technical_loss: list[str] = Field(default_factory=list, description="Players who lost technically.")
    details: dict[str, Any] = Field(default_factory=dict, description="Game specific: choices, drawn_number, …")


class MatchResultReport(LeagueMessage):
    """MATCH_RESULT_REPORT, from the referee the match is assigned to."""

    model_config = STRICT

    league_id: LeagueId | None = None
    round_id: RoundNumber | None = None
    match_id: str = Field(min_length=1, max_length=16)
    game_type: GameType | None = None
    result: ReportedResult
    match_log: JsonObjects = Field(default_factory=list, description="The ordered message log.")


class LeagueQuery(LeagueMessage):
    """LEAGUE_QUERY."""

    model_config = STRICT

    league_id: LeagueId | None = None
    query_type: Literal["GET_STANDINGS", "GET_SCHEDULE", "GET_NEXT_MATCH", "GET_PLAYER_STATS"]
    query_params: dict[str, Any] = Field(
        default_factory=dict, description="player_id (GET_NEXT_MATCH, GET_PLAYER_STATS), round_id (GET_SCHEDULE)."
    )

    @field_validator("query_type", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("query_params", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return {} if value is None else value


class GetStandings(BaseModel):
    """Arguments of get_standings: an envelope is welcome but not required."""

    model_config = ConfigDict(extra="allow")

    league_id: str | None = Field(None, description="Omit for the league in progress.")
    conversation_id: str | None = None


# -- reply models (each tool's outputSchema) ----------------------------------------------------
class RegisterPlayerReply(LeagueReply):
    """LEAGUE_REGISTER_RESPONSE."""

    message_type: Literal["LEAGUE_REGISTER_RESPONSE"]
    league_id: str | None
    player_id: str | None = Field(description="P01, P02, … when ACCEPTED; null when REJECTED.")
    status: Literal["ACCEPTED", "REJECTED"]
    reason: str | None
    auth_token: str | None = Field(description="Shown once: send it in every later message.")
    league_manager_token: str | None = Field(description="What the LM sends as auth_token when it calls you.")


class RegisterRefereeReply(LeagueReply):
    """REFEREE_REGISTER_RESPONSE."""

    message_type: Literal["REFEREE_REGISTER_RESPONSE"]
    league_id: str | None
    referee_id: str | None = Field(description="REF01, REF02, … when ACCEPTED; null when REJECTED.")
    status: Literal["ACCEPTED", "REJECTED"]
    reason: str | None
    auth_token: str | None
    league_manager_token: str | None


class MatchResultAck(LeagueReply):
    """MATCH_RESULT_ACK."""

    message_type: Literal["MATCH_RESULT_ACK"]
    league_id: str
    match_id: str
    status: Literal["RECORDED", "DUPLICATE"]


class LeagueQueryReply(LeagueReply):
    """LEAGUE_QUERY_RESPONSE."""

    message_type: Literal["LEAGUE_QUERY_RESPONSE"]
    league_id: str
    query_type: str
    success: bool
    data: dict[str, Any]


class StandingsReply(LeagueReply):
    """LEAGUE_STANDINGS (get_standings)."""

    message_type: Literal["LEAGUE_STANDINGS"]
    league_id: str
    status: str
    round_id: int
    standings: list[dict[str, Any]]


# -- the toolset --------------------------------------------------------------------------------
log = logging.getLogger("league.lm")

# JSON-RPC's range for server errors: the call could not be served now and may be sent again as is.
SERVER_UNAVAILABLE = -32000
RETRY_AFTER_SECONDS = 1.0


class DatabaseOutage:
    """The LM's view of a database outage: logged once when it begins and once when it ends,
    not once per call refused meanwhile. Reads may work while writes fail (a locked SQLite
    file), so the outage ends only after ``QUIET`` seconds without a refusal."""

    QUIET = 5.0
    since: float | None = None
    last: float = 0.0  # when a call was last refused

    @classmethod
    def refused(cls, exc: Exception) -> JsonRpcError:
        """The retryable JSON-RPC error a call gets while the database is unavailable."""
        cls.last = time.monotonic()
        if cls.since is None:
            cls.since = cls.last
            log.warning("database unavailable (%s: %s); calls are refused as retryable", type(exc).__name__, exc)
        return JsonRpcError(
            SERVER_UNAVAILABLE,
            "Database unavailable; nothing was recorded: send the same message again",
            {
                "retryable": True,
                "retry_after_seconds": RETRY_AFTER_SECONDS,
                "error_code": ErrorCode.INTERNAL_SERVER_ERROR.value,
                "reason": f"{type(exc).__name__}: {exc}"[:200],
            },
        )

    @classmethod
    def over(cls) -> None:
        """A call went through: the outage is over if none was refused for ``QUIET`` seconds."""
        now = time.monotonic()
        if cls.since is not None and now - cls.last >= cls.QUIET:
            log.warning("database available again after %.1f s", cls.last - cls.since)
            cls.since = None


class LeagueManagerToolset(Toolset):
    """A Toolset that writes every call to the Event log: what came in and what went out."""

    async def call(self, tool: Tool, arguments: dict[str, Any], ctx: CallContext) -> tuple[dict[str, Any], bool]:
        """A database that is down or locked (OperationalError, InterfaceError) is not a bug: the
        call is refused with a retryable JSON-RPC error (``DatabaseOutage``), nothing recorded,
        so that the agent sends it again (a referee re-sends its report until it is recorded)."""
        try:
            answer = await self._call_logged(tool, arguments, ctx)
        except (OperationalError, InterfaceError) as exc:
            raise DatabaseOutage.refused(exc) from exc
        if DatabaseOutage.since is not None:
            DatabaseOutage.over()
        return answer

    async def _call_logged(
        self, tool: Tool, arguments: dict[str, Any], ctx: CallContext
    ) -> tuple[dict[str, Any], bool]:
        # Over the limit: E017 + HTTP 429 before any database work or logging (league/ratelimit.py).
        await limiter.check(arguments, ctx.bearer_token, ctx.client_host, tool.name)
        if has_nul(arguments, ctx.body):
            # PostgreSQL cannot store NUL in text or JSON: refuse it up front, for every database.
            raise LeagueError(ErrorCode.INVALID_MESSAGE_FORMAT, "text may not contain NUL (\\u0000) characters")
        if ctx.request_id is None and tool.name in ("register_player", "register_referee"):
            # A JSON-RPC notification gets no reply: the new token would be lost with it.
            raise LeagueError(
                ErrorCode.INVALID_MESSAGE_FORMAT,
                f"{tool.name} needs a JSON-RPC id: the reply carries your auth_token",
                context={"field": "id"},
            )
        if tool.name == REPORT_TOOL:
            return await self._report(tool, arguments, ctx)
        if tool.name in REGISTRATION_TOOLS:
            return await self._registration(tool, arguments, ctx)
        if tool.name in READ_JOBS:
            return await self._read(tool, arguments, ctx)
        if tool.name == LIST_LEAGUES:  # polled by every referee every few seconds: not logged
            return await super().call(tool, arguments, ctx)
        reply, is_error = await super().call(tool, arguments, ctx)
        await sync_to_async(log_exchange)(tool, arguments, reply, ctx.identity)
        return reply, is_error

    async def _refused(self, tool: Tool, arguments: dict[str, Any], err: LeagueError) -> tuple[dict[str, Any], bool]:
        reply = self.error_reply(err, arguments, tool)
        await sync_to_async(log_exchange)(tool, arguments, reply, None)
        return reply, True

    async def _report(self, tool: Tool, arguments: dict[str, Any], ctx: CallContext) -> tuple[dict[str, Any], bool]:
        """MATCH_RESULT_REPORT: checked here like any call, then authenticated, recorded and logged
        in one job on the DB thread, together with the reports queued beside it (``ReportQueue``)."""
        try:
            message = self.checked(tool, arguments, from_json=ctx.from_json)
        except LeagueError as err:
            return await self._refused(tool, arguments, err)
        return await ReportQueue.current().submit(PendingReport(tool, arguments, message, ctx.bearer_token))

    async def _read(self, tool: Tool, arguments: dict[str, Any], ctx: CallContext) -> tuple[dict[str, Any], bool]:
        """A read (league_query, get_standings): authentication, the answer and its Event rows in
        one DB job (three trips to the DB thread before, each a thread hand-off)."""
        try:
            message = self.checked(tool, arguments, from_json=ctx.from_json)
        except LeagueError as err:
            return await self._refused(tool, arguments, err)
        return await sync_to_async(read_logged)(tool, arguments, message, ctx.bearer_token)

    async def _registration(
        self, tool: Tool, arguments: dict[str, Any], ctx: CallContext
    ) -> tuple[dict[str, Any], bool]:
        """A registration and its Event rows in one DB job and one transaction (it used to be two
        trips to the DB thread, each with its transaction, plus a query for the league to log)."""
        try:
            message = self.checked(tool, arguments, from_json=ctx.from_json)
            return await sync_to_async(register_logged)(tool, arguments, message, ctx.bearer_token), False
        except LeagueError as err:  # nothing of the refused registration was written: log the refusal
            return await self._refused(tool, arguments, err)


_NUL = b"\\u0000"


def has_nul(arguments: dict[str, Any], body: bytes | None = None) -> bool:
    """Whether a string in ``arguments`` holds a NUL character. JSON can only write one as the
    escape ``\\u0000`` (a raw control character in a string is invalid JSON, refused by the
    parser), so a request ``body`` without that escape has none and needs no second look: a
    report's arguments (its match log) cost ~15 µs to encode again for this check. ``body``:
    the raw request, when the call came over HTTP."""
    if body is not None and _NUL not in body:
        return False
    return _NUL in dumps(arguments)


def capped(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload``, or a summary of it when it is larger than EVENT_PAYLOAD_MAX_BYTES: what agents
    send is logged, but never more than that per message (extra fields included)."""
    size = len(dumps(payload))
    if size <= settings.EVENT_PAYLOAD_MAX_BYTES:
        return payload
    summary = {k: payload[k] for k in SUMMARY_FIELDS if isinstance(payload.get(k), str | int) and k in payload}
    summary = {k: v[:100] if isinstance(v, str) else v for k, v in summary.items()}
    return {**summary, "truncated": True, "size_bytes": size, "fields": [str(k)[:64] for k in list(payload)[:50]]}


# Tools that only read, and the fields of their answers the Event log does not copy.
READ_TOOLS = frozenset({"league_query", "handle_league_query", "get_standings"})
READ_BULKY = ("data", "standings")


def _lists(value: Any) -> list[list]:
    """The top-level lists of a read answer (standings rows, rounds, history)."""
    found = []
    for item in value.values():
        if isinstance(item, list):
            found.append(item)
        elif isinstance(item, dict):
            found.extend(v for v in item.values() if isinstance(v, list))
    return found


def log_exchange(
    tool: Tool, request: dict[str, Any], reply: dict[str, Any], identity: Identity | None, league_pk: int | None = None
) -> None:
    """Two Event rows (IN request, OUT reply) in one insert (see ``exchange_rows`` for the league)."""
    with transaction.atomic():
        append_events(exchange_rows(tool, request, reply, identity, league_pk))


def exchange_rows(
    tool: Tool,
    request: dict[str, Any],
    reply: dict[str, Any],
    identity: Identity | None,
    league_pk: int | None = None,
) -> list[EventValues]:
    """The two Event rows of a call, to append: the request (IN) and the reply (OUT). The league
    is the caller's, else ``league_pk`` when the caller knows it, else the one the messages name."""
    league = identity.league if identity else None
    if league is None and league_pk is not None:
        league = League(pk=league_pk)  # only its key is written
    if league is None:
        league_id = reply.get("league_id") or request.get("league_id")
        if isinstance(league_id, str) and league_id:
            league = queries.find_league(league_id)
    sender = request.get("sender") if isinstance(request.get("sender"), str) else ""
    if identity is not None:  # the token decides who called, whatever the sender's spelling
        sender = f"{identity.kind}:{identity.agent_id}"
    recipient = sender
    if reply.get("player_id") and reply.get("message_type") == "LEAGUE_REGISTER_RESPONSE":
        recipient = f"player:{reply['player_id']}"
    elif reply.get("referee_id"):
        recipient = f"referee:{reply['referee_id']}"
    match_id = request.get("match_id") if isinstance(request.get("match_id"), str) else ""
    if isinstance(request.get("match_log"), list):
        # The match log is stored once, in MatchResult.log (the match page and the bench read it
        # there); the logged message keeps how many entries it had.
        entries = len(request["match_log"])
        request = {k: v for k, v in request.items() if k != "match_log"}
        request["match_log_entries"] = entries
    if tool.name in READ_TOOLS:
        # A read answer is recomputable from the state; the log keeps what was asked and how big
        # the answer was, not a copy of the table on every call.
        bulky = {k: reply[k] for k in READ_BULKY if k in reply}
        if bulky:
            reply = {k: v for k, v in reply.items() if k not in READ_BULKY}
            reply["answer_bytes"] = len(dumps(bulky))
            reply["answer_rows"] = sum(len(v) for v in _lists(bulky))
    return [
        event_values(
            league,
            "IN",
            request.get("message_type") or tool.name,
            agent=sender,
            match_id=match_id,
            payload=capped(request),
        ),
        event_values(
            league, "OUT", reply.get("message_type", ""), agent=recipient, match_id=match_id, payload=capped(reply)
        ),
    ]


# -- reports: one DB job per batch of reports (group commit) -----------------------------------
REPORT_TOOL = "report_match_result"


@dataclass(frozen=True)
class PendingReport:
    """A MATCH_RESULT_REPORT that passed the envelope and model checks, waiting for the DB thread."""

    tool: Tool
    arguments: dict[str, Any]
    message: MatchResultReport
    bearer: str | None


class ReportQueue:
    """Group commit for reports: the reports that arrive while a batch is on the DB thread go
    together in the next one, one transaction for them all.

    Each report keeps its own answer: ``record_reports`` judges them one by one in arrival order.
    The first report to find the queue idle takes everything queued and runs it; the others wait
    on the lock and find their answer ready (or lead the next batch). One queue per event loop.
    """

    _queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, ReportQueue] = weakref.WeakKeyDictionary()

    def __init__(self) -> None:
        self._pending: list[tuple[PendingReport, asyncio.Future]] = []
        self._lock = asyncio.Lock()

    @classmethod
    def current(cls) -> ReportQueue:
        loop = asyncio.get_running_loop()
        queue = cls._queues.get(loop)
        if queue is None:
            queue = cls._queues[loop] = cls()
        return queue

    async def submit(self, report: PendingReport) -> tuple[dict[str, Any], bool]:
        entry = (report, asyncio.get_running_loop().create_future())
        self._pending.append(entry)
        try:
            async with self._lock:
                if not entry[1].done():
                    batch, self._pending = self._pending, []
                    job = asyncio.ensure_future(sync_to_async(record_reports)([r for r, _ in batch]))
                    job.add_done_callback(lambda done: _settle(batch, done))
                    # Waited for, not awaited: were this caller to go away, the batch would still run
                    # and answer the others; its outcome (or error) is read from the future below.
                    await asyncio.wait({job})
        except asyncio.CancelledError:
            if entry in self._pending:
                self._pending.remove(entry)  # not taken by a batch: it will never run
            raise
        return entry[1].result()


def _settle(batch: list[tuple[PendingReport, asyncio.Future]], job: asyncio.Future) -> None:
    """Hand each report of a finished batch its answer (or the batch's exception)."""
    error = None if job.cancelled() else job.exception()
    for n, (_, future) in enumerate(batch):
        if future.done():
            continue
        if job.cancelled():
            future.cancel()
        elif error is not None:
            future.set_exception(error)
        elif isinstance(job.result()[n], BaseException):
            future.set_exception(job.result()[n])
        else:
            future.set_result(job.result()[n])


def record_reports(reports: list[PendingReport]) -> list[tuple[dict[str, Any], bool] | Exception]:
    """Authenticate, record and log a batch of reports in one transaction: each report's
    ``(reply, is_error)``. Should the batch fail as a whole (a database error), each report is
    tried again on its own, so one report's failure is its own."""
    try:
        return _record_reports(reports)
    except Exception:
        if len(reports) == 1:
            raise
    outcomes: list[tuple[dict[str, Any], bool] | Exception] = []
    for report in reports:
        try:
            outcomes.extend(_record_reports([report]))
        except Exception as exc:  # this report's own failure: its caller gets a -32603
            outcomes.append(exc)
    return outcomes


def _record_reports(reports: list[PendingReport]) -> list[tuple[dict[str, Any], bool]]:
    with transaction.atomic():
        identities = authenticate_many(REPORT_ROLE, [(report.arguments, report.bearer) for report in reports])
        accepted = [(n, identity) for n, identity in enumerate(identities) if isinstance(identity, Identity)]
        recorded, state_rows = actions.record_results(
            [
                actions.Report(
                    identity.agent,
                    reports[n].message.match_id,
                    reports[n].message.result.model_dump(),
                    reports[n].message.match_log,
                )
                for n, identity in accepted
            ]
        )
        outcomes: list[Identity | LeagueError | actions.Recorded] = list(identities)
        for (n, _), outcome in zip(accepted, recorded, strict=True):
            outcomes[n] = outcome
        # The state rows (match_finished, round_played, report_conflict) come first, as when
        # each report logged its exchange after its own transaction.
        rows = state_rows
        replies = []
        for report, identity, outcome in zip(reports, identities, outcomes, strict=True):
            msg = report.message
            if isinstance(outcome, LeagueError):
                reply, is_error = toolset.error_reply(outcome, report.arguments, report.tool), True
            else:
                league_id = identity.league.league_id
                reply = toolset.reply(
                    msg, "MATCH_RESULT_ACK", league_id=league_id, match_id=msg.match_id, status=outcome.status
                )
                is_error = False
            known = identity if isinstance(identity, Identity) else None
            rows.extend(exchange_rows(report.tool, report.arguments, reply, known))
            replies.append((reply, is_error))
        append_events(rows)
    return replies


async def _authenticate(tool: Tool, arguments: dict[str, Any], ctx: CallContext) -> Identity:
    return await sync_to_async(authenticate)(tool.auth or "agent", arguments, ctx.bearer_token)


toolset = LeagueManagerToolset(
    name="league-manager",
    version="2.0.0",
    sender="league_manager",
    error_message_type="LEAGUE_ERROR",
    authenticator=_authenticate,
    instructions=(
        "Even/Odd League Manager (league.v2). Register with register_player or register_referee, keep the "
        "auth_token you get (it is shown once) and send it in every later message."
    ),
)


def _registration_reply(msg: LeagueMessage, message_type: str, id_field: str, reg: actions.Registration) -> dict:
    reply = toolset.reply(
        msg,
        message_type,
        league_id=reg.league_id,
        **{id_field: reg.agent_id},
        status=reg.status,
        reason=reg.reason,
    )
    reply["auth_token"] = reg.auth_token
    reply["league_manager_token"] = reg.league_manager_token
    return reply


REGISTRATION_TOOLS = frozenset({"register_player", "register_referee"})


def registration(
    tool_name: str, msg: RegisterPlayerRequest | RegisterRefereeRequest, bearer: str | None
) -> tuple[dict[str, Any], int | None]:
    """Run a registration (sync, in the caller's transaction): the reply and the league's key."""
    token = presented_token(msg.model_dump(), bearer)
    if tool_name == "register_player":
        reg = actions.register_player(msg.league_id, msg.player_meta.model_dump(), token)
        return _registration_reply(msg, "LEAGUE_REGISTER_RESPONSE", "player_id", reg), reg.league_pk
    kind = msg.sender.partition(":")[0]
    if kind != "referee":
        raise refusal(
            ErrorCode.AUTH_TOKEN_INVALID,
            "sender",
            "'referee:<name>': only a referee can register as a referee",
            msg.sender,
            see("registering"),
        )
    reg = actions.register_referee(msg.league_id, msg.referee_meta.model_dump(), token)
    return _registration_reply(msg, "REFEREE_REGISTER_RESPONSE", "referee_id", reg), reg.league_pk


def register_logged(tool: Tool, arguments: dict[str, Any], msg: BaseModel, bearer: str | None) -> dict[str, Any]:
    """A registration and the IN/OUT Event rows of its call, in one transaction."""
    with transaction.atomic():
        reply, league_pk = registration(tool.name, msg, bearer)
        append_events(exchange_rows(tool, arguments, reply, None, league_pk))
    return reply


@toolset.tool(
    "register_player",
    RegisterPlayerRequest,
    message_types=("LEAGUE_REGISTER_REQUEST",),
    description="Join a league as a player; returns your player_id and auth_token (shown once).",
    output=RegisterPlayerReply,
    see=see("registering"),
)
async def register_player(msg: RegisterPlayerRequest, ctx: CallContext) -> dict[str, Any]:
    # Through /mcp, LeagueManagerToolset.call runs registrations with their logging (register_logged).
    return (await sync_to_async(registration)("register_player", msg, ctx.bearer_token))[0]


@toolset.tool(
    "register_referee",
    RegisterRefereeRequest,
    message_types=("REFEREE_REGISTER_REQUEST",),
    description="Join a league as a referee; returns your referee_id and auth_token (shown once).",
    output=RegisterRefereeReply,
    see=see("registering"),
)
async def register_referee(msg: RegisterRefereeRequest, ctx: CallContext) -> dict[str, Any]:
    return (await sync_to_async(registration)("register_referee", msg, ctx.bearer_token))[0]


REPORT_ROLE = "referee"


@toolset.tool(
    REPORT_TOOL,
    MatchResultReport,
    message_types=("MATCH_RESULT_REPORT",),
    auth=REPORT_ROLE,
    description="The assigned referee reports a match result (idempotent: a repeat is DUPLICATE).",
    output=MatchResultAck,
    see=see("reporting-a-result-referees"),
)
async def report_match_result(msg: MatchResultReport, ctx: CallContext) -> dict[str, Any]:
    """One report on its own (``toolset.call`` batches them through ``ReportQueue`` instead)."""
    identity: Identity = ctx.identity
    recorded = await sync_to_async(actions.record_result)(
        identity.agent, msg.match_id, msg.result.model_dump(), msg.match_log
    )
    return toolset.reply(
        msg, "MATCH_RESULT_ACK", league_id=identity.league.league_id, match_id=msg.match_id, status=recorded.status
    )


def _run_query(identity: Identity, query_type: str, params: dict[str, Any]) -> dict[str, Any]:
    league = identity.league
    if query_type == "GET_STANDINGS":
        return {"round_id": league.current_round, "standings": queries.standings(league)}
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


@toolset.tool(
    "league_query",
    LeagueQuery,
    aliases=("handle_league_query",),
    message_types=("LEAGUE_QUERY",),
    auth="agent",
    description="Ask the league: GET_STANDINGS, GET_SCHEDULE, GET_NEXT_MATCH or GET_PLAYER_STATS.",
    output=LeagueQueryReply,
    see=see("asking-the-league"),
)
async def league_query(msg: LeagueQuery, ctx: CallContext) -> dict[str, Any]:
    # Through /mcp, LeagueManagerToolset.call runs reads with their authentication and logging.
    return (await sync_to_async(league_query_reply)(msg, ctx.identity))[0]


def league_query_reply(msg: LeagueQuery, identity: Identity) -> tuple[dict[str, Any], League]:
    data = _run_query(identity, msg.query_type, msg.query_params)
    reply = toolset.reply(
        msg,
        "LEAGUE_QUERY_RESPONSE",
        league_id=identity.league.league_id,
        query_type=msg.query_type,
        success=True,
        data=data,
    )
    return reply, identity.league


def _standings_payload(league_id: str | None = None) -> dict[str, Any]:
    return _standings_of(queries.get_league(league_id))


def _standings_of(league: League) -> dict[str, Any]:
    return {
        "league_id": league.league_id,
        "status": league.status,
        "round_id": league.current_round,
        "standings": queries.standings(league),
    }


@toolset.tool(
    "get_standings",
    GetStandings,
    envelope=False,
    description="Current standings of a league (public; league_id optional).",
    output=StandingsReply,
    see=see("asking-the-league"),
)
async def get_standings(msg: GetStandings, ctx: CallContext) -> dict[str, Any]:
    return (await sync_to_async(standings_reply)(msg, None))[0]


LIST_LEAGUES = "list_leagues"


@toolset.tool(
    LIST_LEAGUES,
    GetStandings,
    envelope=False,
    description="The leagues open for registration or in play (public): referees poll it to serve each.",
    output=LeagueList,
    see=see("referee-side"),
)
async def list_leagues(msg: GetStandings, ctx: CallContext) -> dict[str, Any]:
    leagues = await sync_to_async(_league_summaries)()
    return toolset.reply(msg, "LEAGUE_LIST", leagues=leagues)


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


def standings_reply(msg: GetStandings, _identity: Identity | None) -> tuple[dict[str, Any], League]:
    league = queries.get_league(msg.league_id)
    return toolset.reply(msg, "LEAGUE_STANDINGS", **_standings_of(league)), league


# The read tools as sync jobs: (message, identity or None) -> (reply, the league it is about).
READ_JOBS: dict[str, Callable[[Any, Identity | None], tuple[dict[str, Any], League]]] = {
    "league_query": league_query_reply,
    "get_standings": standings_reply,
}


def read_logged(tool: Tool, arguments: dict[str, Any], msg: BaseModel, bearer: str | None) -> tuple[dict, bool]:
    """A read tool's call in one job on the DB thread: authenticate (when the tool needs it),
    answer, and log the exchange. A refusal is answered and logged the same way."""
    identity = league = None
    try:
        if tool.auth:
            identity = authenticate(tool.auth, arguments, bearer)
        (reply, league), is_error = READ_JOBS[tool.name](msg, identity), False
    except LeagueError as err:
        reply, is_error = toolset.error_reply(err, arguments, tool), True
    log_exchange(tool, arguments, reply, identity, league.pk if league else None)
    return reply, is_error


# -- resources ----------------------------------------------------------------------------------
def _resource(read: Any) -> Any:
    """Run a sync reader; an unknown league or match becomes 'resource not found'."""

    async def reader(uri: str, params: dict[str, str]) -> Any:
        try:
            return await sync_to_async(read)(**params)
        except LeagueError as exc:
            raise LookupError(exc.description) from exc

    return reader


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
