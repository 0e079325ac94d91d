"""The referee agent: its tools, its registration with the LM, capacity, and report delivery.

``Referee(config).asgi_app()`` is a complete agent: serve it with uvicorn (``runreferee``) or
in a thread (tests). Matches run as asyncio tasks in the server's event loop; results go to
the LM with ``report_match_result`` and are re-sent until acknowledged.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import re
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from random import Random
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from leagueproto.asgi import make_asgi_app
from leagueproto.client import AgentClient, CallFailed, CallResult, RetryPolicy
from leagueproto.endpoint_policy import (
    DEFAULT_ALLOWED_NETWORKS,
    DEFAULT_PORTS,
    LOOPBACK_NETWORKS,
    AddressPolicy,
    IPNetwork,
    ip_of,
    networks,
)
from leagueproto.envelope import AGENT_PROTOCOL_VERSION, make_message, new_conversation_id, parse_timestamp
from leagueproto.errors import MISSING, RETRYABLE, ErrorCode, LeagueError, refusal, see
from leagueproto.jsonutil import dumps
from leagueproto.messages import Ack, LeagueMessage, LeagueReply, RoundNumber
from leagueproto.server import McpServer, agent_hosts
from leagueproto.timeouts import Timeouts
from leagueproto.tools import CallContext, Toolset, same_token
from referee.games import GAMES, get_game
from referee.runner import ABANDONED, FINISHED, MatchAbandoned, MatchRunner, MatchSpec, Seat
from referee.store import StateStore

log = logging.getLogger(__name__)

VERSION = "1.0.0"
SEE_REFEREE_TOOLS = see("tools-a-referee-serves")
SEE_MATCH = see("how-a-match-runs")
SEE_REFEREE_SIDE = see("referee-side")
# A player's answer sent to the referee as a call of its own instead of in the HTTP reply.
ANSWER_TYPES = ("CHOOSE_PARITY_RESPONSE", "MOVE_RESPONSE", "GAME_JOIN_ACK")
# A player's answers sent as calls of their own, noted in its match's log at most this many times.
STRAY_NOTES_KEPT = 10
FINISHED_KEPT = 1000  # finished matches kept in memory for get_match_state and idempotency
# Reports waiting together go to the LM in one JSON-RPC batch of at most this many, and of at
# most this many bytes of messages: the LM answers a body over 1 MiB with 413 (docs/protocol.md),
# and the JSON-RPC framing of each item needs room too. A larger report goes alone, as before.
# An LM with a smaller limit answers a batch 413: the referee then halves its cap (_send_reports).
REPORT_BATCH = 50
REPORT_BATCH_BYTES = 960 * 1024
# The longest wait between two tries of a report the LM gave no pace for (it was unreachable).
REPORT_BACKOFF_MAX = 5.0
# The LM's answers that say it holds this report's result: only then are the players told it.
RECORDED = frozenset({"RECORDED", "DUPLICATE"})

# A report waiting for the sender: its message, its timeout, the future its delivery task awaits.
Outgoing = tuple[dict[str, Any], float, asyncio.Future[CallResult]]


def retry_after(exc: CallFailed) -> float:
    """The wait the LM asked for in a retryable JSON-RPC error (docs/protocol.md: while its
    database is unavailable it answers -32000 with ``retry_after_seconds``), else 0."""
    data = (exc.rpc_error or {}).get("data")
    if isinstance(data, dict) and data.get("retryable"):
        value = data.get("retry_after_seconds")
        if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= 300:
            return float(value)
    return 0.0


def _fitting(items: list[tuple[Outgoing, int]], cap: int) -> int:
    """How many of ``items`` (each with its size), from the first, go in one batch of at most
    REPORT_BATCH and ``cap`` bytes; at least one (a report larger than ``cap`` goes alone)."""
    count, size = 1, items[0][1]
    while count < min(len(items), REPORT_BATCH) and size + items[count][1] <= cap:
        size += items[count][1]
        count += 1
    return count


@dataclass
class RefereeConfig:
    name: str = "Referee"
    host: str = "127.0.0.1"
    port: int = 8001
    league_url: str | None = None
    league_id: str | None = None
    max_concurrent: int = 4
    register: bool = True
    state_dir: str | Path | None = None
    advertise_host: str | None = None
    endpoint: str | None = None  # overrides host/port/advertise_host (tests on ephemeral ports)
    grace_seconds: float = 30.0
    register_timeout: float = 10.0
    backoff_initial: float = 0.5
    backoff_max: float = 30.0
    report_retry: RetryPolicy = field(default_factory=RetryPolicy)
    rng: Random | None = None
    allowed_hosts: tuple[str, ...] = ()  # Host names answered besides host, advertise_host, loopback
    max_reply_bytes: int = 64 * 1024  # a player's reply past this is a technical failure
    # The operator's referee key, sent as referee_key at registration ($REFEREE_KEY by default, as
    # runreferee reads it, so referees built in-process by demo, bench or tests carry it too).
    key: str | None = field(default_factory=lambda: os.environ.get("REFEREE_KEY") or None)
    follow: bool = True  # without league_id: register with every league the LM lists, as they open
    follow_interval: float = 3.0  # seconds between list_leagues polls
    # A report waits at most this long for others of matches still in play at this referee, to go
    # in the same batch: a 100-player league's reports then reach the LM in about half as many POSTs.
    report_linger: float = 0.02
    report_batch_bytes: int = REPORT_BATCH_BYTES  # the most bytes of reports one POST carries
    # The LM's acknowledgements kept for get_match_state's report_status: those of the matches still
    # kept, with room for reports re-sent after a restart (their matches are not in memory).
    reports_kept: int = 2 * FINISHED_KEPT

    @property
    def contact_endpoint(self) -> str:
        if self.endpoint:
            return self.endpoint
        host = self.advertise_host or self.host
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1"
        return f"http://{host}:{self.port}/mcp"


class StartMatch(LeagueMessage):
    """START_MATCH: the LM assigns one match to this referee."""

    league_id: str = Field(description="The league the match belongs to.")
    round_id: RoundNumber = Field(description="The round number, e.g. 1.")
    match_id: str = Field(description="The match, e.g. 'R1M1'.")
    game_type: str = "even_odd"
    player_A_id: str = Field(description="Player A's id, e.g. 'P01'.")
    player_B_id: str = Field(description="Player B's id, e.g. 'P02'.")
    player_A_endpoint: str = Field(description="Player A's /mcp URL.")
    player_B_endpoint: str = Field(description="Player B's /mcp URL.")
    match_token: str | None = Field(
        None, description="The match's secret: each player is sent only its own token derived from it."
    )
    deadline_at: str | None = Field(
        None, description="UTC match deadline: an outcome reached after it is told to no one (the LM gave it away)."
    )
    start_by: str | None = Field(
        None, description="UTC time after which the LM no longer waits for the answer: not played after it."
    )
    timeouts: dict[str, float] = Field(default_factory=dict)
    retry: dict[str, float] = Field(default_factory=dict)
    max_invalid_moves: int = 3
    standings: dict[str, Any] = Field(
        default_factory=dict, description="Optional {player_id: {wins, losses, draws}} passed to players."
    )
    allowed_networks: list[str] | None = Field(
        None,
        description="The networks the league's players may be reached in, e.g. ['10.0.0.0/8'] "
        "(left out: loopback and the private ranges).",
    )
    allow_service_ports: bool = Field(False, description="Whether players may listen on other services' ports.")


class RunMatch(BaseModel):
    """run_match: a START_MATCH message, or the short form {match_id, player1, player2} (synchronous)."""

    model_config = ConfigDict(extra="allow")


class MatchQuery(BaseModel):
    """get_match_state: {match_id, league_id?}; an envelope is optional."""

    model_config = ConfigDict(extra="allow")
    match_id: str
    league_id: str | None = None


class RoundAnnouncement(LeagueMessage):
    round_id: RoundNumber | None = None
    matches: list[dict[str, Any]] = Field(default_factory=list)


class LeagueCompleted(LeagueMessage):
    champion: dict[str, Any] | None = None
    final_standings: list[dict[str, Any]] = Field(default_factory=list)


class StrayAnswer(BaseModel):
    """A player's answer sent as a call to the referee (refused: answers go in the HTTP reply)."""

    model_config = ConfigDict(extra="allow")

    message_type: str | None = None
    match_id: str | None = None
    league_id: str | None = None
    sender: str | None = None


class StartMatchResponse(LeagueReply):
    """START_MATCH_RESPONSE."""

    message_type: Literal["START_MATCH_RESPONSE"]
    league_id: str
    match_id: str
    status: Literal["ACCEPTED", "REJECTED"]
    reason: str | None
    active_matches: int
    capacity: int


class MatchState(LeagueReply):
    """MATCH_STATE: a match this referee runs or ran, with its full message log."""

    message_type: Literal["MATCH_STATE"]
    match_id: str
    state: str
    players: list[dict[str, Any]]
    result: dict[str, Any] | None
    match_log: list[dict[str, Any]]


class RegistrationRefused(Exception):
    """The LM refused this referee for good (its referee key): runreferee says why and exits 1."""


def _field_of(reply: Mapping[str, Any]) -> Any:
    context = reply.get("context")
    return context.get("field") if isinstance(context, dict) else None


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", name)[:64] or "referee"


class Referee:
    def __init__(self, config: RefereeConfig, *, echo: Callable[[str], None] | None = None) -> None:
        self.config = config
        # What an operator should see (registration, its failures, stopping); a log line by default.
        self.echo = echo or (lambda line: log.info("%s", line))
        self.matches_run = 0
        self.store = StateStore(config.state_dir)
        self.referee_id: str | None = None
        self._sender: tuple[str | None, str, str] | None = None  # (referee_id, name, sender)
        self.auth_token: str | None = None
        self.league_manager_token: str | None = None
        self.league_id: str | None = config.league_id
        # league_id → our identity there (referee_id, auth_token, league_manager_token): the first
        # league's is also in the attributes above; a referee following the LM has more.
        self.seats: dict[str, dict[str, Any]] = {}
        self.accepting = True
        self.matches: OrderedDict[str, MatchRunner] = OrderedDict()
        # key → the LM's acknowledgement, oldest first. An OrderedDict because the oldest is dropped
        # once per match: next(iter()) on a plain dict walks the slots its deletions left behind.
        self.reports: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.last_round: dict[str, Any] | None = None
        self.league_completed: dict[str, Any] | None = None
        self._match_tasks: dict[str, asyncio.Task] = {}  # until each ends (a finished match is its runner)
        # The match tasks still being played, kept apart from _match_tasks (which also holds those
        # telling their players) so that capacity checks need no scan on every start_match.
        self._running: set[asyncio.Task] = set()
        self._report_tasks: dict[str, asyncio.Task[dict[str, Any]]] = {}
        # Report messages waiting for the sender, each with the future its delivery task awaits.
        self._outbox: asyncio.Queue[Outgoing] | None = None
        self._report_sender: asyncio.Task | None = None
        # The byte cap of a batch once the LM answered one 413 (its limit is below ours), else None.
        self._report_cap: int | None = None
        self._register_task: asyncio.Task | None = None
        self._league_registrations: dict[str, asyncio.Task] = {}  # followed leagues registering again
        self._registered: asyncio.Event | None = None
        self._last_refusal: str | None = None
        self.refused: str | None = None  # why the LM refused us for good (the referee key)
        self.on_refused: Callable[[str], None] | None = None  # runreferee stops serving then
        self.client: AgentClient | None = None  # to the League Manager
        self.player_client: AgentClient | None = None  # to players: replies read up to max_reply_bytes
        # The endpoint policy the player client applies to every address it connects to
        # (leagueproto/endpoint_policy.py): the networks of the leagues whose START_MATCH we took,
        # or this machine's alone for a referee that registers nowhere.
        self.networks: dict[str, tuple[list[IPNetwork], bool]] = {}  # league_id → (networks, service ports)
        self.policy = AddressPolicy(networks(LOOPBACK_NETWORKS) if self.local else [])
        self.toolset = self._build_toolset()
        self.server = McpServer(self.toolset)

    # -- identity -----------------------------------------------------------------------------
    @property
    def sender(self) -> str:
        # Every message of every match carries it: built again only when the identity changes.
        cached = self._sender
        if cached is None or cached[0] is not self.referee_id or cached[1] is not self.config.name:
            text = f"referee:{self.referee_id or _safe_name(self.config.name)}"
            cached = self._sender = (self.referee_id, self.config.name, text)
        return cached[2]

    @property
    def active_matches(self) -> int:
        """Matches being played here (the seats taken)."""
        return len(self._running)

    @property
    def unfinished_matches(self) -> int:
        """Matches not over yet: being played, waiting for their record, or telling their players."""
        return len(self._unfinished())

    def _unfinished(self) -> list[asyncio.Task]:
        return [task for task in self._match_tasks.values() if not task.done()]

    @property
    def undelivered_reports(self) -> int:
        """Reports of this referee the LM has not acknowledged yet (each has its delivery task)."""
        return len(self._report_tasks)

    @property
    def local(self) -> bool:
        """A referee that registers with no League Manager (``--no-register``): it runs matches
        for callers on its own machine only, between players on its own machine."""
        return not (self.config.register and self.config.league_url)

    def asgi_app(self) -> Any:
        return make_asgi_app(self.server, on_startup=[self.startup], on_shutdown=[self.shutdown])

    # -- lifecycle (run inside the server's event loop) ---------------------------------------
    async def startup(self) -> None:
        # The endpoint is known by now (tests set it after construction): answer for its host.
        advertised = urlsplit(self.config.contact_endpoint).hostname
        self.server.set_allowed_hosts(
            agent_hosts(self.config.host, self.config.advertise_host, advertised, extra=self.config.allowed_hosts)
        )
        self.client = AgentClient()
        self.policy.own_port = urlsplit(self.config.contact_endpoint).port
        if self.config.league_url:
            # Relay endpoints (players behind NAT) live on the LM's own address: like the LM, we
            # let it through whatever the leagues' networks (never the metadata rule).
            lm = urlsplit(self.config.league_url)
            self.policy.passes = {((lm.hostname or "").lower(), lm.port or DEFAULT_PORTS.get(lm.scheme, 80))}
        self.player_client = AgentClient(max_response_bytes=self.config.max_reply_bytes, address_check=self.policy)
        self._registered = asyncio.Event()
        self._outbox = asyncio.Queue()
        identity = self.store.load_identity()
        if identity and identity.get("league_url") == self.config.league_url:
            leagues = identity.get("leagues")
            if isinstance(leagues, dict):
                self.seats.update({k: v for k, v in leagues.items() if isinstance(v, dict)})
            if identity.get("referee_id"):
                self._adopt(identity)
        for pending in self.store.pending_reports():
            self._start_report(pending["key"], pending)
        if self.config.register and self.config.league_url:
            follow = self.config.follow and not self.config.league_id
            task = self._follow() if follow else self._register_loop()
            self._register_task = asyncio.create_task(task, name="referee-register")

    async def shutdown(self) -> None:
        """Stop taking matches; let running ones finish within the grace period.

        A match cut off by the grace period is abandoned (the LM reassigns it after its
        deadline); reports not yet acknowledged stay in ``--state-dir`` for the next start.
        """
        self.accepting = False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.grace_seconds
        running = self._unfinished()
        if running:
            await asyncio.wait(running, timeout=self.config.grace_seconds)
        reports = [t for t in self._report_tasks.values() if not t.done()]
        if reports:
            await asyncio.wait(reports, timeout=max(0.0, min(deadline - loop.time(), 5.0)))
        leftovers = [t for t in (*self._match_tasks.values(), *self._report_tasks.values()) if not t.done()]
        for task in (self._register_task, self._report_sender, *self._league_registrations.values()):
            if task is not None and not task.done():
                leftovers.append(task)
        for task in leftovers:
            task.cancel()
        await asyncio.gather(*leftovers, return_exceptions=True)
        for client in (self.client, self.player_client):
            if client:
                await client.close()

    # -- registration -------------------------------------------------------------------------
    def _adopt(self, identity: Mapping[str, Any]) -> None:
        """Take ``identity`` as this referee's first (primary) league, and as its seat there."""
        self.referee_id = identity.get("referee_id")
        self.auth_token = identity.get("auth_token")
        self.league_manager_token = identity.get("league_manager_token")
        self.league_id = identity.get("league_id") or self.league_id
        if self.league_id and self.referee_id:
            self.seats[self.league_id] = dict(identity)
        if self._registered is not None and self.referee_id and self.auth_token:
            self._registered.set()

    def _seat(self, league_id: Any) -> Mapping[str, Any] | None:
        """Our identity in ``league_id`` (a referee following the LM has one per league)."""
        return self.seats.get(league_id) if isinstance(league_id, str) else None

    def sender_for(self, league_id: str | None) -> str:
        seat = self._seat(league_id)
        return f"referee:{seat['referee_id']}" if seat and seat.get("referee_id") else self.sender

    def token_for(self, league_id: str | None) -> str | None:
        seat = self._seat(league_id)
        return seat.get("auth_token") if seat else self.auth_token

    def registration_request(self, league_id: str | None = None) -> dict[str, Any]:
        target = league_id or self.league_id
        fields: dict[str, Any] = {
            "referee_meta": {
                "display_name": self.config.name,
                "version": VERSION,
                "protocol_version": AGENT_PROTOCOL_VERSION,
                "game_types": sorted(GAMES),
                "contact_endpoint": self.config.contact_endpoint,
                "max_concurrent_matches": self.config.max_concurrent,
            }
        }
        if target:
            fields["league_id"] = target
        if self.config.key:
            fields["referee_key"] = self.config.key
        # A known token lets the LM update this referee instead of registering a new one; a token
        # of another league is never sent (it proves nothing there).
        seat = self._seat(target)
        token = seat.get("auth_token") if seat else (self.auth_token if target == self.league_id else None)
        return make_message(
            "REFEREE_REGISTER_REQUEST", f"referee:{_safe_name(self.config.name)}", auth_token=token, **fields
        )

    async def register_once(self, league_id: str | None = None) -> bool:
        """One REFEREE_REGISTER_REQUEST (to ``league_id``, else our league or the one open); True
        when the LM accepted it, else ``_last_refusal`` says why. RegistrationRefused when the LM
        refuses the referee key: no retry can help."""
        assert self.client is not None and self.config.league_url
        target = league_id or self.league_id
        request = self.registration_request(league_id)
        result = await self.client.call(
            self.config.league_url, "register_referee", request, timeout=self.config.register_timeout
        )
        reply = result.reply
        if result.is_error or reply.get("status") != "ACCEPTED" or not reply.get("referee_id"):
            why = reply.get("reason") or reply.get("error_description") or reply
            code = reply.get("error_code")
            self._last_refusal = f"{code or reply.get('status') or 'not accepted'}: {why}"
            if code in (ErrorCode.AUTH_TOKEN_INVALID, ErrorCode.AUTH_TOKEN_MISSING):
                if request.get("auth_token") and _field_of(reply) != "referee_key":
                    # Our saved identity is stale (another LM, a reset league): join afresh.
                    self.echo(f"the League Manager refused our saved identity ({code}); registering afresh")
                    self.seats.pop(target, None)  # type: ignore[arg-type]
                    if target == self.league_id:
                        self.referee_id = self.auth_token = self.league_manager_token = None
                else:
                    # Refused for the referee key: retrying cannot help, the operator must act.
                    given = "the key given (--key / REFEREE_KEY)" if self.config.key else "no key (--key / REFEREE_KEY)"
                    raise RegistrationRefused(f"the League Manager refused {given}: {code}: {why}")
            return False
        seat = self._seat(target) or {}
        identity = {
            "league_url": self.config.league_url,
            "referee_id": reply["referee_id"],
            "auth_token": reply.get("auth_token")
            or seat.get("auth_token")
            or (self.auth_token if target == self.league_id else None),
            "league_manager_token": reply.get("league_manager_token"),
            "league_id": reply.get("league_id") or target,
        }
        if self.referee_id is None or identity["league_id"] == self.league_id:
            self._adopt(identity)  # our first league (or our league again, with a rotated token)
        else:
            self.seats[identity["league_id"]] = identity
            if self._registered is not None:
                self._registered.set()
        self._save_identity()
        self.echo(
            f"referee {self.config.name} registered as {identity['referee_id']} in league {identity['league_id']} "
            f"({self.config.league_url}); waiting for matches"
        )
        return True

    def _save_identity(self) -> None:
        primary = self._seat(self.league_id) or {"league_url": self.config.league_url, "league_id": self.league_id}
        self.store.save_identity({**primary, "leagues": self.seats})

    async def _register_loop(self, league_id: str | None = None) -> None:
        delay = self.config.backoff_initial
        attempt = 0
        while True:
            attempt += 1
            self._last_refusal = None
            try:
                if await self.register_once(league_id):
                    return
                cause = f"the League Manager answered {self._last_refusal}"
            except CallFailed as exc:
                cause = f"{exc.detail} ({self.config.league_url})"
            except RegistrationRefused as exc:
                self._refused_for_good(exc)
                return
            self.echo(f"registration attempt {attempt} failed: {cause}; retrying in {delay:.1f} s")
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.config.backoff_max)

    def _refused_for_good(self, exc: RegistrationRefused) -> None:
        self.refused = str(exc)
        self.echo(f"registration refused: {exc}")
        if self.on_refused is not None:
            self.on_refused(str(exc))

    async def _follow(self) -> None:
        """Serve every league that needs a referee: poll the LM's ``list_leagues`` and register
        with each league of a game we know as it appears (one line each). An LM without that
        tool (another implementation) gets the single registration of ``_register_loop``."""
        assert self.client is not None and self.config.league_url
        delay = self.config.follow_interval
        declined: dict[str, str] = {}  # league → its status when it last refused us (asked again on a change)
        key_refusals: dict[str, str] = {}  # league → why it refused our referee key
        # Leagues joined by this run: a seat kept in --state-dir is registered again (presenting
        # its token), as a restarted referee does with its one league.
        joined: set[str] = set()
        failing = False
        while True:
            try:
                result = await self.client.call(
                    self.config.league_url, "list_leagues", {}, timeout=self.config.register_timeout
                )
            except CallFailed as exc:
                if exc.code == ErrorCode.INVALID_MESSAGE_FORMAT:  # it answered, but lists no leagues
                    log.info("the League Manager has no list_leagues (%s): registering once", exc.detail)
                    await self._register_loop()
                    return
                if not failing:
                    self.echo(f"cannot list the leagues: {exc.detail} ({self.config.league_url}); retrying")
                failing = True
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.config.backoff_max)
                continue
            failing, delay = False, self.config.follow_interval
            leagues = result.reply.get("leagues") if not result.is_error else None
            for entry in leagues if isinstance(leagues, list) else []:
                if not isinstance(entry, dict) or entry.get("game_type") not in GAMES:
                    continue
                league_id, status = entry.get("league_id"), str(entry.get("status"))
                if not isinstance(league_id, str) or league_id in joined or declined.get(league_id) == status:
                    continue
                try:
                    ok = await self.register_once(league_id)
                except CallFailed:
                    break  # the LM went away: the next poll says so
                except RegistrationRefused as exc:
                    # A league's own key opens that league only: another league refusing it is
                    # news for the log, not a reason to leave the leagues that took us.
                    declined[league_id] = status
                    key_refusals[league_id] = str(exc)
                    self.echo(f"league {league_id} ({status}) refused our referee key; not refereeing it")
                    continue
                if ok:
                    joined.add(league_id)
                else:
                    declined[league_id] = status
                    self.echo(f"league {league_id} ({status}) did not take us: {self._last_refusal}")
            if not self.seats and not joined and key_refusals and len(key_refusals) == len(declined):
                # Every league we know refused the key and none took us: the operator must act.
                self._refused_for_good(RegistrationRefused(next(iter(key_refusals.values()))))
                return
            await asyncio.sleep(delay)

    async def reregister(self, league_id: str | None = None) -> None:
        """The LM no longer knows our token (E012/E013): register again (once at a time)."""
        if not (self.config.register and self.config.league_url):
            return
        if league_id is not None and league_id != self.league_id and league_id in self.seats:
            # A league we follow: one registration at a time for it too (each rotates the token).
            task = self._league_registrations.get(league_id)
            if task is None or task.done():
                task = asyncio.create_task(self._register_loop(league_id), name=f"referee-reregister-{league_id}")
                self._league_registrations[league_id] = task
            await asyncio.shield(task)
            return
        if self._register_task is None or self._register_task.done():
            assert self._registered is not None
            self._registered.clear()
            self._register_task = asyncio.create_task(self._register_loop(), name="referee-reregister")
        await asyncio.shield(self._register_task)

    # -- tools --------------------------------------------------------------------------------
    def _build_toolset(self) -> Toolset:
        toolset = Toolset(
            name="referee",
            version=VERSION,
            sender=lambda: self.sender,
            error_message_type="GAME_ERROR",
            instructions="An Even/Odd league referee: the LM assigns matches with start_match.",
        )

        tool = functools.partial(toolset.tool, see=SEE_REFEREE_TOOLS)

        @tool("start_match", StartMatch, message_types=("START_MATCH",), output=StartMatchResponse)
        async def start_match(msg: StartMatch, ctx: CallContext) -> dict[str, Any]:
            """Assign a match to this referee; answers at once, the match runs in the background."""
            self._check_lm_token(msg.auth_token or ctx.bearer_token, msg.league_id, ctx)
            return self._start(msg)

        @tool("run_match", RunMatch, envelope=False)
        async def run_match(msg: RunMatch, ctx: CallContext) -> dict[str, Any]:
            """start_match, or the short synchronous form {match_id, player1, player2} (replies with the result)."""
            raw = dict(msg.model_extra or {})
            if "message_type" in raw or "player1" not in raw:
                reply, _ = await toolset.call(toolset.tools["start_match"], raw, ctx)
                return reply
            self._check_lm_token(raw.get("auth_token") or ctx.bearer_token, None, ctx)
            return await self._run_seed_match(raw)

        @tool("get_match_state", MatchQuery, message_types=("GET_MATCH_STATE",), envelope=False, output=MatchState)
        async def get_match_state(msg: MatchQuery, ctx: CallContext) -> dict[str, Any]:
            """The League Manager's view of a match this referee runs or ran: its state and its log
            up to the last turn resolved (an open turn's answers and the players' endpoints are
            never shown)."""
            self._check_lm_token((msg.model_extra or {}).get("auth_token") or ctx.bearer_token, msg.league_id, ctx)
            runner = self._find(msg.match_id, msg.league_id)
            saved = self.store.played_report(f"{msg.league_id}:{msg.match_id}") if runner is None else None
            if saved is not None:
                # Played before a restart: finished, its report kept (the LM must not give it away).
                fields = saved.get("fields") or {}
                key = saved.get("key")
                return toolset.reply(
                    msg.model_extra or {},
                    "MATCH_STATE",
                    league_id=fields.get("league_id"),
                    round_id=fields.get("round_id"),
                    match_id=msg.match_id,
                    game_type=fields.get("game_type"),
                    state=FINISHED,
                    players=[],
                    result=fields.get("result"),
                    match_log=fields.get("match_log") or [],
                    report_status=(self.reports.get(key) or {}).get("status") or "PENDING",
                )
            if runner is None:
                raise LeagueError(
                    ErrorCode.MATCH_NOT_FOUND,
                    f"this referee has no match {msg.match_id}",
                    context={"match_id": msg.match_id, "league_id": msg.league_id},
                )
            key = runner.spec.key
            return toolset.reply(
                msg.model_extra or {},
                "MATCH_STATE",
                **runner.snapshot(),
                report_status=(self.reports.get(key) or {}).get("status") or ("PENDING" if runner.result else None),
            )

        @tool("notify_round", RoundAnnouncement, message_types=("ROUND_ANNOUNCEMENT",), output=Ack)
        async def notify_round(msg: RoundAnnouncement, ctx: CallContext) -> dict[str, Any]:
            """ROUND_ANNOUNCEMENT from the LM (informational)."""
            self._check_lm_token(msg.auth_token or ctx.bearer_token, (msg.model_extra or {}).get("league_id"), ctx)
            self.last_round = {"round_id": msg.round_id, "matches": msg.matches}
            return toolset.reply(msg, "ACK", status="received", round_id=msg.round_id)

        @tool("notify_league_completed", LeagueCompleted, message_types=("LEAGUE_COMPLETED",), output=Ack)
        async def notify_league_completed(msg: LeagueCompleted, ctx: CallContext) -> dict[str, Any]:
            """LEAGUE_COMPLETED from the LM."""
            self._check_lm_token(msg.auth_token or ctx.bearer_token, (msg.model_extra or {}).get("league_id"), ctx)
            self.league_completed = {"champion": msg.champion, "final_standings": msg.final_standings}
            return toolset.reply(msg, "ACK", status="received")

        @tool(
            "answer_callback",
            StrayAnswer,
            aliases=("choose_parity", "make_move", "choose_parity_response", "move_response"),
            message_types=ANSWER_TYPES,
            envelope=False,
            see=SEE_MATCH,
        )
        async def answer_callback(msg: StrayAnswer, ctx: CallContext) -> dict[str, Any]:
            """Refuses a player's answer sent as a call to the referee: answers belong in the HTTP reply."""
            raise self._stray_answer(msg, ctx)

        return toolset

    def _stray_answer(self, msg: StrayAnswer, ctx: CallContext) -> LeagueError:
        """The refusal of an answer a player sent as a call of its own, noted in its match's log
        when it carries one of its players' tokens (anyone else is only refused: a log is not for strangers
        to write in), at most ``STRAY_NOTES_KEPT`` times a match."""
        what = msg.message_type or ctx.method
        sender = msg.sender or "a player"
        rule = (
            "answers must be in the HTTP reply to the referee's call (e.g. CHOOSE_PARITY_RESPONSE as the "
            "result of choose_parity), not a later call to the referee"
        )
        runner = self._find(msg.match_id, msg.league_id) if msg.match_id else None
        token = (msg.model_extra or {}).get("auth_token") or ctx.bearer_token
        if (
            runner is not None
            and isinstance(token, str)
            and any(same_token(token, mine) for mine in runner.spec.player_tokens.values())
            and sum(e["message_type"] == "STRAY_ANSWER" for e in runner.log.entries) < STRAY_NOTES_KEPT
        ):
            problem = f"{sender} sent {what} as a call to the referee; {rule}"
            runner.log.event("STRAY_ANSWER", sender=sender, message_type=what, problem=problem)
        return refusal(
            ErrorCode.INVALID_MESSAGE_FORMAT,
            "method",
            rule,
            what,
            SEE_MATCH,
            problem=f"{what} sent to the referee as a call of its own is not an answer",
        )

    def _check_lm_token(self, token: Any, league_id: Any, ctx: CallContext) -> None:
        """Only the League Manager that registered us may assign matches or read them: it shows
        the ``league_manager_token`` it gave us at registration. Before registering we run nothing
        for anyone (E013); a referee that registers nowhere (``--no-register``) answers callers on
        its own machine only.

        ``token`` is what the caller sent, of any JSON type (the short run_match form reads it
        unvalidated): anything but a string is refused like a wrong token, never an exception."""
        seat = self._seat(league_id)
        expected = seat.get("league_manager_token") if seat else self.league_manager_token
        if not expected:
            self._check_unregistered(ctx)
            return
        wanted = "the league_manager_token this referee received at registration"
        if token is not None and not isinstance(token, str):
            raise refusal(
                ErrorCode.AUTH_TOKEN_INVALID,
                "auth_token",
                f"{wanted} (a string)",
                token,
                SEE_REFEREE_SIDE,
                problem=f"auth_token must be a string, not {type(token).__name__}",
            )
        if not token:
            raise refusal(
                ErrorCode.AUTH_TOKEN_MISSING,
                "auth_token",
                wanted,
                MISSING,
                SEE_REFEREE_SIDE,
                problem="auth_token is required: the LM's token for this referee",
            )
        if not same_token(token, expected):
            raise refusal(
                ErrorCode.AUTH_TOKEN_INVALID,
                "auth_token",
                wanted,
                "another token",
                SEE_REFEREE_SIDE,
                problem="auth_token is not the League Manager's token for us",
            )

    def _check_unregistered(self, ctx: CallContext) -> None:
        """A caller of an LM tool while we hold no League Manager's token: refused (E013) unless
        we are registered with an LM that gives none, or registering nowhere and the caller is on
        this machine (it could reach every player we could itself)."""
        if self.local:
            address = ip_of(ctx.client_host or "")
            if address is not None and address.is_loopback:
                return
            raise LeagueError(
                ErrorCode.REFEREE_NOT_REGISTERED,
                "this referee registers with no League Manager (--no-register): it runs matches for "
                "callers on its own machine only",
                context={"see": SEE_REFEREE_SIDE},
            )
        if self.referee_id is None:
            raise LeagueError(
                ErrorCode.REFEREE_NOT_REGISTERED,
                "this referee has not registered with its League Manager yet: it runs matches for that "
                "League Manager only, once registered",
                context={"see": SEE_REFEREE_SIDE},
            )

    def _find(self, match_id: str, league_id: str | None) -> MatchRunner | None:
        if league_id is not None:
            return self.matches.get(f"{league_id}:{match_id}")
        for runner in reversed(self.matches.values()):
            if runner.spec.match_id == match_id:
                return runner
        return None

    def _admit(self, key: str) -> str | None:
        """Why a new match cannot start now, or None."""
        if not self.accepting:
            return "shutting down"
        if self.active_matches >= self.config.max_concurrent:
            return "at capacity"
        return None

    def _start(self, msg: StartMatch) -> dict[str, Any]:
        key = f"{msg.league_id}:{msg.match_id}"

        def answer(status: str, reason: str | None) -> dict[str, Any]:
            return self.toolset.reply(
                msg,
                "START_MATCH_RESPONSE",
                league_id=msg.league_id,
                match_id=msg.match_id,
                status=status,
                reason=reason,
                active_matches=self.active_matches,
                capacity=self.config.max_concurrent,
            )

        # Idempotent: the LM may resend an assignment. A match played here is never played again:
        # its saved report goes to the LM once more (the LM's first copy may have been refused
        # or lost), and the answer says it is finished.
        runner = self.matches.get(key)
        if runner is not None and runner.status == ABANDONED:
            runner = None  # told to no one: played afresh when given again
        task = self._match_tasks.get(key)
        if runner is not None and (runner.result is None or (task is not None and not task.done())):
            return answer("ACCEPTED", f"already {'finished' if runner.result else 'running'}")
        saved = self._report_of(runner) if runner is not None and runner.result else self.store.played_report(key)
        if runner is not None or saved is not None:
            if saved is not None and self.config.league_url and msg.league_id is not None:
                self._start_report(key, saved)
            return answer("ACCEPTED", "already finished")
        stale = stale_start(msg)
        if stale:
            return answer("REJECTED", stale)
        if msg.game_type not in GAMES:
            return answer(
                "REJECTED", f"game type {msg.game_type!r} not supported (supported: {', '.join(sorted(GAMES))})"
            )
        refusal = self._admit(key)
        if refusal:
            return answer("REJECTED", refusal)
        self._apply_networks(msg)
        retry = RetryPolicy(retries=int(msg.retry.get("retries", 3)), delay=float(msg.retry.get("delay", 2.0)))
        spec = MatchSpec(
            league_id=msg.league_id,
            round_id=msg.round_id,
            match_id=msg.match_id,
            game_type=msg.game_type,
            player_a=Seat(msg.player_A_id, msg.player_A_endpoint),
            player_b=Seat(msg.player_B_id, msg.player_B_endpoint),
            match_token=msg.match_token,
            timeouts=Timeouts.from_mapping(msg.timeouts),
            retry=retry,
            max_invalid_moves=max(0, msg.max_invalid_moves),
            standings=msg.standings,
            deadline_at=_utc_or_none(msg.deadline_at),
        )
        runner = self._new_runner(spec)
        self._spawn_match(key, self._run_and_report(runner))
        return answer("ACCEPTED", None)

    def _apply_networks(self, msg: StartMatch) -> None:
        """Take the league's endpoint policy from its START_MATCH: the player client then lets
        through an address any of our leagues allows, as the LM's conductor does (the league of
        an address is not known where it is checked). A referee registering nowhere keeps to
        this machine."""
        if self.local:
            return
        allowed = networks(msg.allowed_networks if msg.allowed_networks is not None else DEFAULT_ALLOWED_NETWORKS)
        if self.networks.get(msg.league_id) == (allowed, msg.allow_service_ports):
            return  # the league's policy as its last START_MATCH gave it
        self.networks[msg.league_id] = (allowed, msg.allow_service_ports)
        union: dict[IPNetwork, None] = {}
        for nets, _ in self.networks.values():
            union.update(dict.fromkeys(nets))
        # Set only when they change: setting them forgets the policy's verdicts on addresses.
        allowed, service_ports = list(union), any(ports for _, ports in self.networks.values())
        if allowed != self.policy.allowed:
            self.policy.allowed = allowed
        if service_ports != self.policy.allow_service_ports:
            self.policy.allow_service_ports = service_ports

    def _spawn_match(self, key: str, coro: Coroutine[Any, Any, Any]) -> asyncio.Task:
        """Run a match as a task, counted in active_matches until its outcome is reached (its
        record and its GAME_OVERs then take no seat, ``_commit``) or it ends."""
        task = asyncio.create_task(coro, name=f"match-{key}")
        self._match_tasks[key] = task
        self._running.add(task)
        # Done callbacks run before any coroutine awaiting the task resumes, and before a request
        # that arrives later is handled, so no caller sees a finished match counted as running.
        task.add_done_callback(self._running.discard)
        # A task that has ended is dropped: the runner it leaves is what a finished match keeps.
        task.add_done_callback(lambda done: self._forget_match_task(key, done))
        return task

    def _forget_match_task(self, key: str, task: asyncio.Task) -> None:
        if self._match_tasks.get(key) is task:  # not a newer task for the same match
            del self._match_tasks[key]

    def _new_runner(self, spec: MatchSpec) -> MatchRunner:
        assert self.player_client is not None, "the referee serves only after startup()"
        league = spec.league_id
        runner = MatchRunner(
            spec,
            get_game(spec.game_type, self.config.rng),
            self.player_client,
            lambda: self.sender_for(league),
            commit=self._commit,
        )
        self.matches[spec.key] = runner
        while len(self.matches) > FINISHED_KEPT:
            oldest_key, oldest = next(iter(self.matches.items()))
            if oldest.result is None:
                break
            del self.matches[oldest_key]
            self._match_tasks.pop(oldest_key, None)
        return runner

    def _reports(self, spec: MatchSpec) -> bool:
        """Whether this match's result goes to an LM (not the short run_match form's)."""
        return bool(self.config.league_url) and spec.league_id is not None

    def _report_of(self, runner: MatchRunner) -> dict[str, Any]:
        """The report of a finished match, as it is saved and sent."""
        spec = runner.spec
        assert runner.result is not None
        return {
            "key": spec.key,
            "conversation_id": new_conversation_id(f"conv-{spec.match_id.lower()}-report"),
            "timeout": spec.timeouts.report,
            "fields": {
                "league_id": spec.league_id,
                "round_id": spec.round_id,
                "match_id": spec.match_id,
                "game_type": spec.game_type,
                "result": runner.result.to_dict(),
                "match_log": runner.log.entries,
            },
        }

    async def _commit(self, runner: MatchRunner) -> bool:
        """The runner knows the outcome and has told no player yet. Save the report (a referee
        killed from here on delivers it after its restart, and never plays the match again),
        then have the LM record it: the players are told (True) only once the LM took this very
        result, so what a player is told is what is recorded. False: the LM refused it for good
        (it recorded another referee's result of the match given away while this one was
        stopped, or the match is closed); the runner tells no one. The report's log ends with
        the outcome: the GAME_OVER deliveries come after it."""
        if not self._reports(runner.spec):
            return True  # a match run for no league (run_match): nothing to record first
        # Played: the match holds no seat while it waits for its record and tells its players.
        # The LM counts this referee's room by the matches it has not recorded, so a seat kept
        # past the outcome would refuse start_match calls "at capacity" that the LM rightly sent
        # once it recorded the match (its answer still on the way here), each refusal a failure
        # that cools the referee down while the round waits.
        task = self._match_tasks.get(runner.spec.key)
        if task is not None:
            self._running.discard(task)
        key, report = runner.spec.key, self._report_of(runner)
        try:
            self.store.save_report(key, report)
        except OSError as exc:  # a full disk: the report still goes from memory
            log.error("report %s not saved before it was sent: %s", key, exc)
        reply = await asyncio.shield(self._start_report(key, report))
        return reply.get("status") in RECORDED

    async def _run_and_report(self, runner: MatchRunner) -> None:
        try:
            await runner.run()
        except MatchAbandoned as exc:
            log.warning("match %s abandoned, told to no one: %s", runner.spec.key, exc)
            return
        except Exception:
            log.exception("match %s crashed; it is left for the LM to reassign", runner.spec.key)
            return
        self.matches_run += 1

    # -- reports ------------------------------------------------------------------------------
    def _start_report(self, key: str, pending: dict[str, Any]) -> asyncio.Task[dict[str, Any]]:
        """Deliver a report (once at a time per match); the task ends with the LM's last word on it."""
        if key in self._report_tasks and not self._report_tasks[key].done():
            return self._report_tasks[key]
        task = asyncio.create_task(self._deliver_report(key, pending), name=f"report-{key}")
        self._report_tasks[key] = task
        # Only undelivered reports need their task: a referee that ran for days kept them all.
        task.add_done_callback(lambda done: self._forget_report_task(key, done))
        return task

    def _forget_report_task(self, key: str, task: asyncio.Task) -> None:
        if self._report_tasks.get(key) is task:  # not a newer task for the same report
            del self._report_tasks[key]

    def _acknowledged(self, key: str, reply: dict[str, Any]) -> None:
        """The LM's last word on a report: kept for get_match_state, the oldest dropped past
        ``config.reports_kept``."""
        self.reports[key] = reply
        while len(self.reports) > self.config.reports_kept:
            self.reports.popitem(last=False)
        self.store.remove_report(key)

    async def _deliver_report(self, key: str, pending: dict[str, Any]) -> dict[str, Any]:
        """Send until the LM acknowledges or refuses it for good; returns its answer. Transport
        failures back off exponentially."""
        assert self.client is not None and self._registered is not None and self.config.league_url
        delay = max(self.config.report_retry.delay, 0.05)
        while True:
            if self.config.register and not self._registered.is_set():
                await self._registered.wait()
            league_id = pending["fields"].get("league_id")
            message = make_message(
                "MATCH_RESULT_REPORT",
                self.sender_for(league_id),
                conversation_id=pending["conversation_id"],
                auth_token=self.token_for(league_id),
                **pending["fields"],
            )
            try:
                result = await self._send_report(message, pending.get("timeout", 10.0))
            except CallFailed as exc:
                # The LM's own pace when it gives one (its database is away: it knows when to ask
                # again), else a backoff of at most REPORT_BACKOFF_MAX: a report waiting longer
                # than that after an outage holds its round up for nothing.
                asked = retry_after(exc)
                wait = asked or delay
                log.info("report %s not delivered (%s); retrying in %.1f s", key, exc, wait)
                await asyncio.sleep(wait)
                if not asked:
                    delay = min(delay * 2, self.config.backoff_max, REPORT_BACKOFF_MAX)
                continue
            else:
                reply = result.reply
                code = reply.get("error_code")
                if not result.is_error and reply.get("status") in RECORDED:
                    self._acknowledged(key, reply)
                    return reply
                if code in (
                    ErrorCode.AUTH_TOKEN_INVALID,
                    ErrorCode.REFEREE_NOT_REGISTERED,
                    ErrorCode.AUTH_TOKEN_MISSING,
                ):
                    log.warning("LM does not know our token (%s): registering again", code)
                    if self.config.register:
                        await self.reregister(league_id)
                        continue
                elif result.is_error and code not in RETRYABLE:
                    # The LM will never take this report (unknown match, another referee's, conflict).
                    log.error("LM refused report %s: %s %s", key, code, reply.get("error_description"))
                    self._acknowledged(key, reply)
                    return reply
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.config.backoff_max, REPORT_BACKOFF_MAX)

    async def _send_report(self, message: dict[str, Any], timeout: float) -> CallResult:
        """The LM's answer to one report, sent with the others waiting at the same moment (one
        POST, a JSON-RPC batch); raises CallFailed as ``AgentClient.call`` does."""
        assert self._outbox is not None
        if self._report_sender is None or self._report_sender.done():
            self._report_sender = asyncio.create_task(self._send_reports(self._outbox), name="report-sender")
        answer: asyncio.Future[CallResult] = asyncio.get_running_loop().create_future()
        self._outbox.put_nowait((message, timeout, answer))
        return await answer

    def _report_batch_bytes(self) -> int:
        """The byte cap of a batch: ``config.report_batch_bytes``, or less after the LM answered 413."""
        most = self.config.report_batch_bytes
        return most if self._report_cap is None else min(self._report_cap, most)

    async def _send_reports(self, outbox: asyncio.Queue[Outgoing]) -> None:
        """The one sender to the LM: takes all that is queued, sends it, answers each waiter.
        Those queued while a POST is in flight go together in the next one. A report found alone
        waits up to ``config.report_linger`` for others while matches are still being played here
        (matches started together end together); with none being played (all the others wait
        for their reports too) it goes at once, so a round's last report is never held."""
        loop = asyncio.get_running_loop()
        held: tuple[Outgoing, int] | None = None  # taken from the queue but past the cap: first in the next
        while True:
            if held is None:
                item = await outbox.get()
                held = (item, len(dumps(item[0])))
            waiting, size, held = [held], held[1], None
            cap = self._report_batch_bytes()
            linger_until = loop.time() + self.config.report_linger
            while len(waiting) < REPORT_BATCH:
                if outbox.empty():
                    left = linger_until - loop.time()
                    if self.active_matches == 0 or left <= 0:
                        break
                    try:
                        item = await asyncio.wait_for(outbox.get(), left)
                    except TimeoutError:
                        break
                else:
                    item = outbox.get_nowait()
                item_size = len(dumps(item[0]))
                if size + item_size > cap:
                    held = (item, item_size)
                    break
                waiting.append((item, item_size))
                size += item_size
            await self._post_reports([entry for entry in waiting if not entry[0][2].done()])

    async def _post_reports(self, waiting: list[tuple[Outgoing, int]]) -> None:
        """Send ``waiting`` (each report with its size) in one POST and answer each waiter. A batch
        the LM finds too large (HTTP 413) is not the reports' fault: the cap is halved, for later
        batches too, and the same reports go again in batches under it."""
        assert self.client is not None and self.config.league_url
        if not waiting:
            return  # every delivery task was cancelled
        try:
            if len(waiting) == 1:
                (message, timeout, _), _ = waiting[0]
                outcomes: list[CallResult | CallFailed] = [
                    await self.client.call(
                        self.config.league_url,
                        "report_match_result",
                        message,
                        timeout=timeout,
                        policy=self.config.report_retry,
                    )
                ]
            else:
                outcomes = await self.client.call_batch(
                    self.config.league_url,
                    [("report_match_result", message) for (message, _, _), _ in waiting],
                    timeout=max(timeout for (_, timeout, _), _ in waiting),
                    policy=self.config.report_retry,
                )
        except CallFailed as exc:
            if exc.http_status == 413 and len(waiting) > 1:
                self._lower_report_cap(waiting)
                while waiting:  # under the cap of the moment: a part refused in turn lowers it again
                    count = _fitting(waiting, self._report_batch_bytes())
                    part, waiting = waiting[:count], waiting[count:]
                    await self._post_reports([entry for entry in part if not entry[0][2].done()])
                return
            outcomes = [exc] * len(waiting)
        except Exception as exc:  # a bug: every waiter hears it
            outcomes = [exc] * len(waiting)
        for ((_, _, answer), _), outcome in zip(waiting, outcomes, strict=True):
            if answer.done():
                continue
            if isinstance(outcome, Exception):
                answer.set_exception(outcome)
            else:
                answer.set_result(outcome)

    def _lower_report_cap(self, refused: list[tuple[Outgoing, int]]) -> None:
        """Halve the cap below the size of the batch the LM refused, so that batch splits; never
        below its largest report, so the cap still holds a report (a larger one goes alone)."""
        size = sum(item_size for _, item_size in refused)
        cap = max(size // 2, max(item_size for _, item_size in refused))
        self._report_cap = min(cap, self._report_batch_bytes())
        log.info(
            "LM refused a batch of %d reports (%d bytes) as too large (HTTP 413): batches of at most %d bytes now",
            len(refused),
            size,
            self._report_cap,
        )

    # -- the short form: synchronous run_match ------------------------------------------------------------
    async def _run_seed_match(self, raw: dict[str, Any]) -> dict[str, Any]:
        # The short form is read unvalidated (its players are free-form objects): every field is
        # checked for its type here, so no value a caller sends reaches an exception.
        match_id = _short_text(raw, "match_id") or new_conversation_id("match")
        game_type = _short_text(raw, "game_type") or "even_odd"
        seats = []
        for n in (1, 2):
            player = raw.get(f"player{n}")
            if not isinstance(player, dict) or not isinstance(player.get("endpoint"), str):
                raise refusal(
                    ErrorCode.MISSING_REQUIRED_FIELD,
                    f"player{n}.endpoint",
                    "the player's /mcp URL, e.g. http://127.0.0.1:8101/mcp",
                    player.get("endpoint", MISSING) if isinstance(player, dict) else player,
                    SEE_REFEREE_TOOLS,
                    missing_fields=[f"player{n}.endpoint"],
                )
            name = _short_text(player, "display_name", f"player{n}.display_name")
            pid = _safe_name(_short_text(player, "player_id", f"player{n}.player_id") or name or f"player{n}")
            seats.append(Seat(pid, player["endpoint"], name))
        if seats[0].player_id == seats[1].player_id:
            seats[1] = Seat(seats[1].player_id + "_2", seats[1].endpoint, seats[1].display_name)
        if game_type not in GAMES:
            raise LeagueError(ErrorCode.GAME_TYPE_NOT_SUPPORTED, f"game type {game_type!r} not supported")
        key = f":{match_id}"
        if key in self.matches and self.matches[key].result is not None:
            runner = self.matches[key]
        else:
            busy = self._admit(key)
            if busy:
                raise LeagueError(ErrorCode.INVALID_GAME_STATE, f"cannot run the match now: {busy}")
            spec = MatchSpec(
                league_id=None,
                round_id=raw["round_id"] if type(raw.get("round_id")) is int else None,
                match_id=match_id,
                game_type=game_type,
                player_a=seats[0],
                player_b=seats[1],
                timeouts=Timeouts.from_mapping(raw.get("timeouts")),
            )
            runner = self._new_runner(spec)
            await self._spawn_match(key, runner.run())
        return self.toolset.reply(raw, "MATCH_RESULT", **seed_result(runner))


def _utc_or_none(value: str | None) -> datetime | None:
    try:
        return parse_timestamp(value) if value is not None else None
    except LeagueError:
        return None


def stale_start(msg: StartMatch) -> str | None:
    """Why ``msg`` must not be played (its ``start_by`` has passed), or None.

    A start_match read only after the LM has stopped waiting for its answer, e.g. queued while
    this referee was stopped (SIGSTOP) or cut off, has been withdrawn: the LM gives the match to
    a referee that answers, and playing it here would tell the players a second outcome. The LM
    says until when it waits (``start_by``: its call budget from the moment it sent the message);
    a message without it (an LM of another kind, a hand-written call) is never stale."""
    if msg.start_by is None:
        return None
    try:
        until = parse_timestamp(msg.start_by)
    except LeagueError:
        return None  # unreadable: nothing says it is old
    late = (datetime.now(UTC) - until).total_seconds()
    if late <= 1.0:  # timestamps are whole seconds
        return None
    return f"stale: start_by {msg.start_by} passed {late:.0f} s ago; the League Manager no longer waits for this answer"


def _short_text(raw: Mapping[str, Any], key: str, field_name: str | None = None) -> str | None:
    """A text field of the short run_match form: a string or a whole number (ids written as
    numbers), absent or null as None; any other type is refused (E002) naming the field."""
    value = raw.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise refusal(ErrorCode.INVALID_MESSAGE_FORMAT, field_name or key, "a string", value, SEE_REFEREE_TOOLS)


def seed_result(runner: MatchRunner) -> dict[str, Any]:
    """The short form's run_match reply (player names, choices, dice roll, winner), plus our result."""
    assert runner.result is not None
    a, b = runner.seats
    details = runner.result.details
    choices = details.get("choices", {})
    names = {seat.player_id: seat.display_name or seat.player_id for seat in (a, b)}
    return {
        "match_id": runner.spec.match_id,
        "game_id": runner.conversation_id,
        "player1": names[a.player_id],
        "player2": names[b.player_id],
        "player1_choice": choices.get(a.player_id),
        "player2_choice": choices.get(b.player_id),
        "dice_roll": details.get("drawn_number"),
        "dice_parity": details.get("number_parity"),
        "winner": names.get(runner.result.winner) if runner.result.winner else None,
        "is_draw": runner.result.status == "DRAW",
        "result": runner.result.to_dict(),
    }
