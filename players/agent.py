"""The player agent: a :class:`Player` (tools, registration, memory) and a :class:`PlayerHost`
that serves one or many players from one process and one uvicorn server (one socket each).

Lifecycle: INIT → REGISTERED → ACTIVE → SHUTDOWN; SUSPENDED after repeated
failures (registration attempts, or matches lost on time), back to ACTIVE on recovery.
Per match: INVITED → PLAYING → AWAITING_RESULT → (GAME_OVER) done.

The player never imports league/ or referee/: everything crosses HTTP.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import inspect
import logging
import random
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from types import MethodType
from typing import Any
from urllib.parse import urlsplit

from leagueproto.asgi import make_asgi_app
from leagueproto.client import AgentClient, CallFailed
from leagueproto.endpoints import canonical_endpoint  # the one form the LM compares too
from leagueproto.envelope import (
    AGENT_PROTOCOL_VERSION,
    GAME_TYPES,
    make_message,
    parse_sender,
    parse_timestamp,
    utc_now,
)
from leagueproto.errors import MISSING, ErrorCode, LeagueError, refusal, see
from leagueproto.messages import Ack
from leagueproto.scoring import DRAW_POINTS, LOSS_POINTS, WIN_POINTS
from leagueproto.serve import ThreadedServer, bind_sockets, make_server
from leagueproto.server import McpServer, agent_hosts
from leagueproto.tools import CallContext, Tool, Toolset, same_token
from players import messages as m
from players.memory import Memory, load_state, save_state
from players.strategies import Strategy, make_strategy
from players.strategies.base import PARITIES, MoveSituation, ParitySituation, number_of_parity

log = logging.getLogger("players")

SEE_PLAYER_TOOLS = see("tools-a-player-serves")
SEE_WHOM_TO_TRUST = see("whom-to-trust")
ANNOUNCED_ROUNDS_KEPT = 8  # a round's invitations follow its announcement; older rounds are over
# How League Managers spell a registration's outcome (ours: ACCEPTED / REJECTED).
ACCEPTED_STATUSES = frozenset({"ACCEPTED", "REGISTERED", "OK", "SUCCESS"})
REFUSED_STATUSES = frozenset({"REJECTED", "REFUSED", "DENIED", "FAILED", "ERROR"})
_ID_KEYS = ("player_id", "assigned_player_id", "id", "agent_id")
MIN_BUDGET = 0.05  # even a past deadline gives a fast strategy this long (deadlines are whole seconds)
FAILURES_TO_SUSPEND = 3
RETRYABLE_REGISTRATION_CODES = {"E001", "E008", "E009", "E010", "E017"}
GRACEFUL_SHUTDOWN = 3.0  # seconds in-flight calls get at shutdown (a "silent" fault player never answers)
# Asking the LM whether a second invitation to a match is a real reassignment: the answer must
# come well inside the 5 s the referee gives the GAME_JOIN_ACK, and a flood of forged invitations
# costs the LM one question per match per MATCH_CHECK_GAP, far below its per-token rate limit.
MATCH_CHECK_TIMEOUT = 3.0
MATCH_CHECK_GAP = 1.0
# A referee tells a result once the LM has recorded it, so the league's LEAGUE_COMPLETED may come
# just before the GAME_OVER of its last match: the player waits at most this long for the results
# of the matches it is in before it shuts down.
LAST_RESULTS_GRACE = 5.0


@dataclass(frozen=True, slots=True)
class Assignment:
    """The LM's answer to GET_MATCH_ASSIGNMENT about one match, and when it was asked."""

    asked_at: float  # time.monotonic() when the question was sent
    token_sha256: str | None  # of the match token its referee holds; None: no referee, or no answer

    def holds(self, token: str) -> bool:
        digest = hashlib.sha256(token.encode()).hexdigest()
        return self.token_sha256 is not None and same_token(digest, self.token_sha256)


class Lifecycle:
    INIT = "INIT"
    REGISTERED = "REGISTERED"
    ACTIVE = "ACTIVE"
    SUSPENDED = "SUSPENDED"
    SHUTDOWN = "SHUTDOWN"


@dataclass
class PlayerConfig:
    name: str
    strategy: str = "random"
    league_url: str | None = None
    league_id: str | None = None
    host: str = "127.0.0.1"
    advertise_host: str | None = None
    port: int = 0
    state_dir: Path | None = None
    version: str = "1.0.0"
    decision_cap: float = 10.0  # never think longer than this, whatever the deadline
    safety_margin: float = 0.25  # answer this long before the deadline
    register_timeout: float = 10.0
    register_attempts: int = 10
    register_backoff: float = 0.5  # first retry delay; doubles, capped at 10 s
    strategy_options: dict[str, Any] = field(default_factory=dict)
    allowed_hosts: tuple[str, ...] = ()  # Host names answered besides host, advertise_host, loopback
    connect: bool = False  # answer over the LM's relay (players/connect.py) instead of a port


def time_budget(
    deadline: str | None, time_limit: float | None, cap: float, margin: float, now: datetime | None = None
) -> float:
    """Seconds a strategy may think: min(deadline - now, time limit, cap) minus a safety margin."""
    remaining = cap
    if deadline:
        try:
            left = (parse_timestamp(deadline) - (now or datetime.now(UTC))).total_seconds()
            remaining = min(remaining, left)
        except LeagueError:
            pass  # a malformed deadline: the cap still bounds us
    if time_limit and time_limit > 0:
        remaining = min(remaining, float(time_limit))
    return max(MIN_BUDGET, min(remaining - margin, remaining * 0.8))


def _text(value: Any) -> str | None:
    """A non-empty string (ids written as numbers included), else None."""
    if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
        return None
    return str(value)


def registered_id(reply: dict[str, Any]) -> str | None:
    """Our player id in a registration reply: ``player_id`` as ours writes it, else the other
    spellings League Managers use (``assigned_player_id``, ``id``, an object ``player``)."""
    for key in _ID_KEYS:
        found = _text(reply.get(key))
        if found:
            return found
    for key in ("player", "data", "result"):
        nested = reply.get(key)
        if isinstance(nested, dict):
            found = next((_text(nested.get(k)) for k in _ID_KEYS if _text(nested.get(k))), None)
            if found:
                return found
    return None


def sender_name(name: str) -> str:
    """A display name made safe for ``player:<name>`` before we have an id."""
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", name)[:64] or "player"


class Player:
    """One player: its toolset and MCP server, identity, memory and strategy."""

    def __init__(
        self,
        config: PlayerConfig,
        *,
        strategy: Strategy | None = None,
        rng: random.Random | None = None,
        executor: Executor | None = None,
        echo: Callable[[str], None] | None = None,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        self.rng = rng or random.Random()
        self.strategy = strategy or make_strategy(config.strategy, rng=self.rng, **config.strategy_options)
        self.executor = executor
        self.echo = echo or (lambda line: log.info("%s", line))
        # What goes wrong (a failed registration attempt, unverified callers): said even when
        # the per-match lines are not.
        self.warn = warn or (lambda line: log.warning("%s", line))
        # How registration ended: "registered"; "refused" (the league said no); "no_league" (the
        # URL or --league-id names no league to join); "gave_up" (no answer after every attempt).
        self.outcome: str | None = None
        self._unverified: set[str] = set()  # kinds of caller already reported as unverified
        self.port = config.port
        self.lifecycle = Lifecycle.INIT
        self.player_id: str | None = None
        self.token: str | None = None
        self.lm_token: str | None = None
        self.league_id = config.league_id
        self.memory = Memory()
        self.in_play: dict[str, dict[str, Any]] = {}  # match_id → what we know of a running match
        # round → {match_id: row} of our matches as the LM's ROUND_ANNOUNCEMENT listed them: an
        # invitation for an announced round must name one of them (its opponent, its referee).
        self.announced: dict[str, dict[str, dict[str, Any]]] = {}
        # match_id → the LM's last word on who referees it (asked only when two tokens compete).
        self.assignments: dict[str, Assignment] = {}
        self._assignment_locks: dict[str, asyncio.Lock] = {}
        self.failures = 0  # consecutive failures (registration attempts, matches lost on time)
        self.registration: dict[str, Any] | None = None  # the LM's last answer, for the CLI
        self.client: AgentClient | None = None
        self.on_registered: Callable[[Player], Awaitable[None]] | None = None  # e.g. runplayer --query
        self.done = asyncio.Event()
        self._told = asyncio.Event()  # set by each GAME_OVER
        self._closing: asyncio.Task | None = None
        self._load()
        self.toolset = self._build_toolset()
        wrap = getattr(self.strategy, "wrap_server", None)  # fault-injection players (players/faults.py)
        self.server: McpServer = wrap(self) if wrap else McpServer(self.toolset)
        self.server.set_allowed_hosts(agent_hosts(config.host, config.advertise_host, extra=config.allowed_hosts))

    # -- identity ------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.config.name

    @property
    def sender(self) -> str:
        return f"player:{self.player_id or sender_name(self.name)}"

    @property
    def endpoint(self) -> str:
        if self.config.connect:
            return "connect"  # the LM assigns a relay endpoint (docs/protocol.md, "Playing from behind NAT")
        port = getattr(self.strategy, "advertise_port", None) or self.port  # the "dead" fault lies here
        return f"http://{self.config.advertise_host or self.config.host}:{port}/mcp"

    @property
    def state_path(self) -> Path | None:
        return self.config.state_dir / f"{sender_name(self.name)}.json" if self.config.state_dir else None

    def _load(self) -> None:
        path = self.state_path
        if path is None:
            return
        data = load_state(path)
        self.memory = Memory.from_dict(data.get("memory") or {})
        identity = data.get("identity") or {}
        if identity.get("league_url") == self.config.league_url and identity.get("player_id"):
            self.player_id = identity["player_id"]
            self.token = identity.get("auth_token")
            self.lm_token = identity.get("league_manager_token")
            self.league_id = self.league_id or identity.get("league_id")

    def save(self) -> None:
        path = self.state_path
        if path is None:
            return
        identity = {
            "display_name": self.name,
            "league_url": self.config.league_url,
            "league_id": self.league_id,
            "player_id": self.player_id,
            "auth_token": self.token,
            "league_manager_token": self.lm_token,
        }
        try:
            save_state(path, {"identity": identity, "memory": self.memory.to_dict()})
        except OSError as exc:  # memory is a bonus: never lose a match over a full disk
            log.warning("%s: cannot save state to %s: %s", self.name, path, exc)

    def _set_lifecycle(self, state: str) -> None:
        if state != self.lifecycle:
            log.debug("%s: %s → %s", self.name, self.lifecycle, state)
            self.lifecycle = state
        if state == Lifecycle.SHUTDOWN:
            self.done.set()

    def shutdown(self) -> None:
        self._set_lifecycle(Lifecycle.SHUTDOWN)

    # -- talking to the League Manager ----------------------------------------------------------
    def registration_request(self) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "player_meta": {
                "display_name": self.name,
                "version": self.config.version,
                "protocol_version": AGENT_PROTOCOL_VERSION,
                "game_types": list(GAME_TYPES),
                "contact_endpoint": self.endpoint,
            }
        }
        if self.league_id:
            fields["league_id"] = self.league_id
        return make_message("LEAGUE_REGISTER_REQUEST", self.sender, auth_token=self.token, **fields)

    async def register(self) -> bool:
        """Register with the LM (retrying transport errors and "no league open yet" with backoff).

        A player that kept its identity in --state-dir sends its token, so the LM updates its
        endpoint instead of rejecting a duplicate. Every failed attempt says why. Returns True
        once accepted; ``outcome`` tells a refusal ("refused"), an address with no league to join
        ("no_league") and giving up ("gave_up") apart.
        """
        if not self.config.league_url or self.client is None:
            raise RuntimeError("register() needs config.league_url and a client")
        delay = self.config.register_backoff
        attempts = self.config.register_attempts
        for attempt in range(1, attempts + 1):
            reason, cause = await self._register_once()
            if reason is None:
                self.outcome = "registered"
                if self.on_registered is not None:
                    await self.on_registered(self)
                return True
            if reason in ("rejected", "final"):
                self.outcome = "refused" if reason == "rejected" else "no_league"
                refused = "registration refused by" if reason == "rejected" else "cannot register with"
                self.warn(f"{self.name}: {refused} {self.config.league_url}: {cause}")
                self.shutdown()
                return False
            self.failures += 1
            if self.failures >= FAILURES_TO_SUSPEND:
                self._set_lifecycle(Lifecycle.SUSPENDED)
            pause = delay * self.rng.uniform(0.8, 1.2)
            then = f"; retrying in {pause:.1f} s" if attempt < attempts else ""
            self.warn(f"{self.name}: registration attempt {attempt}/{attempts} failed: {cause}{then}")
            if attempt < attempts:
                await asyncio.sleep(pause)
                delay = min(delay * 2, 10.0)
        self.outcome = "gave_up"
        self.warn(f"{self.name}: giving up registration with {self.config.league_url} after {attempts} attempts")
        self.shutdown()
        return False

    async def _register_once(self) -> tuple[str | None, str]:
        """``(None, "")`` when accepted; ``("rejected", why)`` when the LM refuses; ``("final",
        what to do)`` when asking again cannot succeed (a URL that is no LM's /mcp, a league that
        does not exist, several open leagues and none named); else a retryable reason and its
        cause in words (connection refused, DNS, HTTP status, LEAGUE_ERROR)."""
        assert self.client is not None and self.config.league_url
        url = self.config.league_url
        try:
            result = await self.client.call(
                url, "register_player", self.registration_request(), timeout=self.config.register_timeout
            )
        except CallFailed as exc:
            status = exc.http_status
            if status is not None and 400 <= status < 500 and status not in (408, 429):
                return "final", f"HTTP {status}: this URL is not a League Manager's /mcp endpoint{_mcp_hint(url)}"
            return exc.code.value, f"{exc.detail} ({url})"
        reply = result.reply
        self.registration = reply
        code = reply.get("error_code")
        status = str(reply.get("status") or "").upper()
        assigned = registered_id(reply)
        if not result.is_error and status not in REFUSED_STATUSES and (status in ACCEPTED_STATUSES or assigned):
            self._adopt_registration(reply, assigned)
            return None, ""
        why = reply.get("reason") or reply.get("error_description") or reply
        if self.token and (code in ("E005", "E012") or status in REFUSED_STATUSES):
            # Our saved identity belongs to another league (or was removed): join as new.
            self.warn(f"{self.name}: saved identity refused ({code or why}), registering afresh")
            self.player_id = self.token = self.lm_token = None
            return "identity", f"saved identity refused: {code or why}"
        if code == ErrorCode.LEAGUE_NOT_FOUND.value:
            if self.league_id:
                return "final", f"there is no league {self.league_id!r} there; {await self._open_leagues()}"
            context = reply.get("context") if isinstance(reply.get("context"), dict) else {}
            if context.get("leagues"):
                return "final", f"{reply.get('error_description')}; run again with --league-id <one of them>"
        if code in RETRYABLE_REGISTRATION_CODES:
            return code, f"LEAGUE_ERROR {code}: {reply.get('error_description')}"
        return "rejected", f"{code}: {why}" if code else str(why)

    async def _open_leagues(self) -> str:
        """The leagues open for registration at the LM (its public ``list_leagues``), in words."""
        assert self.client is not None and self.config.league_url
        try:
            result = await self.client.call(self.config.league_url, "list_leagues", {}, timeout=5.0)
        except CallFailed:
            return "run again with --league-id naming one of its leagues"
        leagues = result.reply.get("leagues")
        names = [
            str(x.get("league_id"))
            for x in (leagues if isinstance(leagues, list) else [])
            if isinstance(x, dict) and x.get("status") == "REGISTERING"
        ]
        if not names:
            return "no league is open for registration there now"
        return f"open for registration: {', '.join(names)} (run again with --league-id <one of them>)"

    def _adopt_registration(self, reply: dict[str, Any], assigned: str | None) -> None:
        """Take our identity from an accepted registration, however the LM spells it."""
        if assigned is None:
            # Accepted, but no id given: we go by our name (the LM knows us by our endpoint).
            assigned = sender_name(self.name)
            self.warn(f"{self.name}: the registration reply names no player id; using {assigned!r}")
        self.player_id = assigned
        self.token = _text(reply.get("auth_token")) or _text(reply.get("token")) or self.token
        self.lm_token = _text(reply.get("league_manager_token")) or self.lm_token
        self.league_id = _text(reply.get("league_id")) or self.league_id
        self.failures = 0
        self._set_lifecycle(Lifecycle.REGISTERED)
        self.save()
        self.echo(f"{self.name}: registered as {self.player_id} in {self.league_id} ({self.endpoint})")

    async def query(
        self, query_type: str, query_params: dict[str, Any] | None = None, *, timeout: float = 10.0
    ) -> dict[str, Any]:
        """Ask the LM ``league_query`` (GET_STANDINGS, GET_SCHEDULE, GET_NEXT_MATCH, GET_PLAYER_STATS,
        GET_MATCH_ASSIGNMENT)."""
        if not self.config.league_url or self.client is None:
            raise RuntimeError("query() needs config.league_url and a client")
        params = dict(query_params or {})
        if self.player_id and query_type in ("GET_NEXT_MATCH", "GET_PLAYER_STATS"):
            params.setdefault("player_id", self.player_id)
        fields: dict[str, Any] = {"query_type": query_type, "query_params": params}
        if self.league_id:
            fields["league_id"] = self.league_id
        message = make_message("LEAGUE_QUERY", self.sender, auth_token=self.token, **fields)
        result = await self.client.call(self.config.league_url, "league_query", message, timeout=timeout)
        return result.reply

    # -- authentication of incoming calls --------------------------------------------------------
    async def _authenticate(self, tool: Tool, arguments: dict[str, Any], ctx: CallContext) -> str:
        kind, ident = _parse_sender(arguments["sender"])
        token = arguments.get("auth_token") or ctx.bearer_token
        if tool.auth == "referee":
            if kind != "referee":
                raise refusal(
                    ErrorCode.AUTH_TOKEN_INVALID,
                    "sender",
                    "'referee:<id>': this tool is called by a referee",
                    arguments["sender"],
                    SEE_PLAYER_TOOLS,
                )
            if not token:
                if self.lm_token is None and self.config.league_url:
                    # A league without league tokens (not ours): its referees may send none either.
                    self._note_unverified("referee", tool.name)
                    return f"referee:{ident}"
                raise refusal(
                    ErrorCode.AUTH_TOKEN_MISSING,
                    "auth_token",
                    "the match token the referee's GAME_INVITATION carried (or an Authorization: Bearer header)",
                    arguments.get("auth_token", MISSING),
                    SEE_PLAYER_TOOLS,
                    problem="referee calls must carry the match token as auth_token (or Authorization: Bearer)",
                    tool=tool.name,
                )
            self._check_match_token(tool, arguments, token)
            return f"referee:{ident}"
        if tool.auth == "league_manager":
            if kind != "league_manager":
                raise refusal(
                    ErrorCode.AUTH_TOKEN_INVALID,
                    "sender",
                    "'league_manager' or 'league_manager:<id>': this tool is called by the League Manager",
                    arguments["sender"],
                    SEE_PLAYER_TOOLS,
                )
            if self.lm_token is None:
                # The LM gave us no league_manager_token: its notifications cannot be checked, and
                # refusing them would only keep us from learning how the league goes.
                self._note_unverified("league_manager", tool.name)
                return "league_manager"
            if not token:
                raise refusal(
                    ErrorCode.AUTH_TOKEN_MISSING,
                    "auth_token",
                    "the league_manager_token this player received at registration",
                    arguments.get("auth_token", MISSING),
                    SEE_PLAYER_TOOLS,
                    problem="League Manager calls must carry the league_manager_token given at registration",
                    tool=tool.name,
                )
            if not same_token(token, self.lm_token):
                raise refusal(
                    ErrorCode.AUTH_TOKEN_INVALID,
                    "auth_token",
                    "the league_manager_token this player received at registration",
                    "another token",
                    SEE_PLAYER_TOOLS,
                    tool=tool.name,
                )
            return "league_manager"
        return kind

    def _note_unverified(self, kind: str, tool: str) -> None:
        """Say once per kind of caller that its calls are taken without a token to check."""
        if kind not in self._unverified:
            self._unverified.add(kind)
            who = "League Manager" if kind == "league_manager" else "referee"
            self.warn(
                f"{self.name}: the League Manager gave no league_manager_token, so {who} calls "
                f"(first: {tool}) are accepted unverified"
            )

    def _check_match_token(self, tool: Tool, arguments: dict[str, Any], token: str) -> None:
        """The invitation binds a match to its token; later calls for that match must reuse it."""
        match_id = arguments.get("match_id")
        if not isinstance(match_id, str):
            return
        if tool.name == "handle_game_invitation":
            return  # binds, or asks to rebind: handle_game_invitation decides (_check_binding)
        bound = self.in_play.get(match_id, {}).get("token")
        if bound is not None and not same_token(token, bound):
            raise refusal(
                ErrorCode.AUTH_TOKEN_INVALID,
                "auth_token",
                f"the match token of the invitation to {match_id}",
                "another token",
                SEE_PLAYER_TOOLS,
                match_id=match_id,
            )

    def _check_announced(self, msg: m.GameInvitation) -> None:
        """E012 for an invitation the LM's announcements contradict: once we have the round's
        ROUND_ANNOUNCEMENT (or one that lists this match), the invitation must name a match of
        ours in it, with the announced opponent and, when the announcement names one, referee
        endpoint. A round never announced to us (an LM that sends no announcements, or one that
        did not reach us) is taken on the referee's word, as before."""
        match_id = msg.match_id
        rows = self.announced.get(str(msg.round_id)) if msg.round_id is not None else None
        if rows is not None:
            row = rows.get(match_id)
        else:  # a round we heard nothing of, but a match we did (a round id spelt otherwise)
            row = next((r[match_id] for r in self.announced.values() if match_id in r), None)
            if row is None:
                return
        if row is None:
            raise self._not_announced(
                msg, "match_id", f"a match of ours in round {msg.round_id}'s announcement", match_id
            )
        opponent = row.get("player_B_id") if row.get("player_A_id") == self.player_id else row.get("player_A_id")
        if msg.opponent_id is not None and str(msg.opponent_id) != str(opponent):
            raise self._not_announced(msg, "opponent_id", f"{opponent!r}, the announced opponent", msg.opponent_id)
        announced_referee = row.get("referee_endpoint")
        invited_by = _field(msg, "referee_endpoint")
        if (
            isinstance(announced_referee, str)
            and isinstance(invited_by, str)
            and canonical_endpoint(invited_by) != canonical_endpoint(announced_referee)
        ):
            raise self._not_announced(
                msg, "referee_endpoint", f"{announced_referee!r}, the announced referee", invited_by
            )

    async def _check_binding(self, msg: m.GameInvitation, token: str | None) -> None:
        """E012 for an invitation to a match already bound to another token, unless the League
        Manager confirms that ``token`` is the one its referee now holds (a real reassignment).
        The first invitation binds; a copy of it with another token, whatever it says of its
        referee, changes nothing for the real referee's calls (docs/protocol.md, "Whom to trust")."""
        bound = self.in_play.get(msg.match_id, {}).get("token")
        if bound is None or (token is not None and same_token(token, bound)):
            return
        if token is not None and await self._lm_confirms(msg.match_id, token):
            self.echo(f"{self.name}: {msg.match_id} is reassigned to {msg.sender}, as the League Manager confirms")
            self.in_play.pop(msg.match_id, None)  # the match starts again with its new referee
            return
        self.warn(
            f"{self.name}: refused an invitation to {msg.match_id} from {msg.sender}: the match is bound to "
            "another token and the League Manager does not confirm this one"
        )
        raise refusal(
            ErrorCode.AUTH_TOKEN_INVALID,
            "auth_token",
            f"the match token {msg.match_id} is bound to, or one the League Manager confirms (GET_MATCH_ASSIGNMENT)",
            "another token",
            SEE_WHOM_TO_TRUST,
            problem="the match already has a referee; a new one needs the League Manager's confirmation",
            match_id=msg.match_id,
        )

    async def _lm_confirms(self, match_id: str, token: str) -> bool:
        """Whether the LM says ``token`` is the match token of ``match_id``'s referee now. One
        question at a time per match; an answer asked after this invitation arrived serves it."""
        if self.client is None or not self.config.league_url or self.token is None:
            return False  # no League Manager to ask: the first binding holds
        arrived = time.monotonic()
        lock = self._assignment_locks.setdefault(match_id, asyncio.Lock())
        async with lock:
            known = self.assignments.get(match_id)
            if known is None or known.asked_at < arrived:
                if known is not None:
                    await asyncio.sleep(known.asked_at + MATCH_CHECK_GAP - time.monotonic())
                known = await self._ask_assignment(match_id)
        return known.holds(token)

    async def _ask_assignment(self, match_id: str) -> Assignment:
        asked = time.monotonic()
        digest = None
        try:
            reply = await self.query("GET_MATCH_ASSIGNMENT", {"match_id": match_id}, timeout=MATCH_CHECK_TIMEOUT)
        except CallFailed as exc:
            self.warn(f"{self.name}: cannot ask the League Manager who referees {match_id}: {exc.detail}")
        else:
            data = reply.get("data") if reply.get("success") is True else None
            found = data.get("match_token_sha256") if isinstance(data, dict) else None
            digest = found if isinstance(found, str) else None
        while len(self.assignments) >= 200:  # matches long over
            oldest = next(iter(self.assignments))
            del self.assignments[oldest]
            self._assignment_locks.pop(oldest, None)
        known = self.assignments[match_id] = Assignment(asked, digest)
        return known

    def _not_announced(self, msg: Any, field_name: str, expected: str, got: Any) -> LeagueError:
        self.warn(f"{self.name}: refused an invitation to {msg.match_id} from {msg.sender}: {field_name} {got!r}")
        return refusal(
            ErrorCode.AUTH_TOKEN_INVALID,
            field_name,
            expected,
            got,
            SEE_WHOM_TO_TRUST,
            problem="the invitation does not match the League Manager's ROUND_ANNOUNCEMENT",
            match_id=msg.match_id,
        )

    def _check_addressee(self, msg: Any) -> None:
        wanted = getattr(msg, "player_id", None)
        if wanted and self.player_id and str(wanted) != self.player_id:
            raise refusal(
                ErrorCode.PLAYER_NOT_REGISTERED,
                "player_id",
                f"{self.player_id!r}, the player this endpoint serves",
                wanted,
                SEE_PLAYER_TOOLS,
                served=self.player_id,
            )

    # -- replies --------------------------------------------------------------------------------
    def _reply(self, msg: Any, message_type: str, fields: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Our reply to ``msg``, in its conversation, carrying the token the call came with: a
        referee gets its match's token back, the LM its league_manager_token. Never our own
        auth_token: that one goes only to the LM, in our own calls (registration, queries), and
        anyone may call this endpoint. What ``toolset.reply`` builds, minus its layers (the sender
        callable, requests given as dicts) that cost more than the message itself on every call.
        ``fields`` is a dict, not keywords: each layer that packed them into keywords again cost
        about a microsecond per reply."""
        conversation_id = getattr(msg, "conversation_id", None)
        token = _field(msg, "auth_token") or ctx.bearer_token
        return make_message(message_type, self.sender, conversation_id=conversation_id, auth_token=token, **fields)

    def _ack(self, msg: Any, ctx: CallContext, **extra: Any) -> dict[str, Any]:
        fields: dict[str, Any] = {"status": "received"}
        if self.player_id:
            fields["player_id"] = self.player_id
        match_id = _field(msg, "match_id")
        if match_id:
            fields["match_id"] = match_id
        round_id = _field(msg, "round_id")
        if round_id is not None:
            fields["round_id"] = round_id
        fields.update(extra)
        return self._reply(msg, "ACK", fields, ctx)

    def _game_fields(self, msg: Any) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        if msg.league_id or self.league_id:
            fields["league_id"] = msg.league_id or self.league_id
        if msg.round_id is not None:
            fields["round_id"] = msg.round_id
        fields["match_id"] = msg.match_id
        fields["player_id"] = self.player_id or msg.player_id
        return fields

    def _match(self, msg: Any) -> dict[str, Any]:
        record = self.in_play.get(msg.match_id)
        if record is None:
            if len(self.in_play) >= 200:  # matches whose GAME_OVER never came
                self.in_play.pop(next(iter(self.in_play)))
            record = self.in_play[msg.match_id] = {"match_id": msg.match_id, "state": "INVITED"}
        if msg.round_id is not None:
            record["round_id"] = msg.round_id
        addressed = getattr(msg, "player_id", None)
        if addressed is not None and "addressed_as" not in record:
            record["addressed_as"] = str(addressed)
        return record

    def _me(self, record: dict[str, Any]) -> str | None:
        """Our id in this match: the one the LM gave us, else the one its referee addresses us by.
        A player restarted before its registration reply came (or whose reply was lost) has no id
        until it registers again, while the LM, which knows its endpoint, keeps it in its matches:
        the match's outcome is the one recorded for the seat the referee addressed, and a WIN is
        not a LOSS because our id is not known yet."""
        return self.player_id or record.get("addressed_as")

    def _activate(self) -> None:
        if self.lifecycle in (Lifecycle.INIT, Lifecycle.REGISTERED):
            self._set_lifecycle(Lifecycle.ACTIVE)

    # -- deciding under a deadline --------------------------------------------------------------
    async def decide(
        self, method: str, situation: Any, fallback: Callable[[], Any], valid: Callable
    ) -> tuple[Any, str]:
        """Run the strategy within ``situation.budget``; (answer, how) where how is "strategy" or
        "fallback:<why>". A slow, failing or nonsensical strategy never costs the deadline."""
        func = getattr(self.strategy, method)
        try:
            if _is_coroutine_function(func):
                raw = await asyncio.wait_for(func(situation), situation.budget)
            elif not getattr(self.strategy, "blocking", True):
                raw = func(situation)
            else:
                loop = asyncio.get_running_loop()
                raw = await asyncio.wait_for(loop.run_in_executor(self.executor, func, situation), situation.budget)
                if inspect.isawaitable(raw):
                    raw = await asyncio.wait_for(raw, situation.budget)
        except TimeoutError:
            log.warning("%s: strategy %s too slow (%.2f s budget): safe move", self.name, method, situation.budget)
            return fallback(), "fallback:timeout"
        except Exception:
            log.exception("%s: strategy %s failed: safe move", self.name, method)
            return fallback(), "fallback:error"
        answer = valid(raw)
        if answer is None:
            log.warning("%s: strategy %s answered %r: safe move", self.name, method, raw)
            return fallback(), "fallback:invalid"
        return answer, "strategy"

    # -- tools ----------------------------------------------------------------------------------
    def _build_toolset(self) -> Toolset:
        ts = Toolset(
            name=f"player-{sender_name(self.name)}",
            version=self.config.version,
            sender=lambda: self.sender,
            error_message_type="GAME_ERROR",
            authenticator=self._authenticate,
            instructions="An Even/Odd league player (league.v2). Referees invite it and ask for choices.",
        )
        # Every tool is documented under "Tools a player serves"; most answer an ACK.
        tool = functools.partial(ts.tool, see=SEE_PLAYER_TOOLS, output=Ack)

        @tool(
            "handle_game_invitation",
            m.GameInvitation,
            aliases=("game_invitation",),
            message_types=("GAME_INVITATION",),
            auth="referee",
            output=m.GameJoinAck,
        )
        async def handle_game_invitation(msg: m.GameInvitation, ctx: CallContext) -> dict:
            """Accept a referee's invitation to a match (GAME_INVITATION → GAME_JOIN_ACK, within 5 s)."""
            self._check_addressee(msg)
            self._check_announced(msg)  # before anything is kept: a forged invitation leaves no trace
            token = msg.auth_token or ctx.bearer_token
            await self._check_binding(msg, token)
            arrival = utc_now()
            record = self._match(msg)
            accept = msg.game_type in GAME_TYPES
            record.update(
                state="PLAYING" if accept else "DECLINED",
                opponent_id=msg.opponent_id,
                role=msg.role_in_match,
                game_type=msg.game_type,
                token=token,
                referee=msg.sender,
            )
            self._activate()
            fields = self._game_fields(msg)
            fields.update(arrival_timestamp=arrival, accept=accept)
            if not accept:
                fields["reason"] = f"game type {msg.game_type!r} is not supported (supported: {', '.join(GAME_TYPES)})"
            return self._reply(msg, "GAME_JOIN_ACK", fields, ctx)

        @tool(
            "choose_parity",
            m.ChooseParityCall,
            message_types=("CHOOSE_PARITY_CALL",),
            auth="referee",
            output=m.ChooseParityResponse,
        )
        async def choose_parity(msg: m.ChooseParityCall, ctx: CallContext) -> dict:
            """Choose "even" or "odd" (CHOOSE_PARITY_CALL → CHOOSE_PARITY_RESPONSE, before the deadline)."""
            self._check_addressee(msg)
            record = self._match(msg)
            opponent = msg.context.opponent_id or record.get("opponent_id")
            record["opponent_id"] = opponent
            situation = ParitySituation(
                player_id=self._me(record) or self.name,
                opponent_id=opponent,
                match_id=msg.match_id,
                round_id=msg.round_id if msg.round_id is not None else msg.context.round_id,
                game_type=msg.game_type,
                your_standings=msg.context.your_standings,
                opponent_history=self.memory.parity_history(opponent),
                my_history=self.memory.my_parity_history(opponent),
                recent_matches=self.memory.matches[-5:],
                league_standings=self.memory.standings,
                budget=time_budget(msg.deadline, None, self.config.decision_cap, self.config.safety_margin),
            )
            choice, how = await self.decide(
                "choose_parity", situation, lambda: self.rng.choice(PARITIES), _valid_parity
            )
            record.update(state="AWAITING_RESULT", my_choice=choice, decided_by=how)
            self._activate()
            fields = self._game_fields(msg)
            fields["parity_choice"] = choice
            return self._reply(msg, "CHOOSE_PARITY_RESPONSE", fields, ctx)

        @tool("notify_game_start", m.GameStart, message_types=("GAME_START",), auth="referee")
        async def notify_game_start(msg: m.GameStart, ctx: CallContext) -> dict:
            """A best-of-5 match starts: learn our role (GAME_START → ACK)."""
            record = self._match(msg)
            me = self._me(record)
            for entry in msg.players:
                if entry.get("player_id") == me:
                    record["bo5_role"] = str(entry.get("role", "")).upper() or None
                elif entry.get("player_id"):
                    record["opponent_id"] = entry["player_id"]
            record["game_type"] = msg.game_config.get("game_type") or record.get("game_type") or "even_odd_bo5"
            return self._ack(msg, ctx)

        @tool(
            "make_move",
            m.MoveRequest,
            aliases=("move_request",),
            message_types=("MOVE_REQUEST",),
            auth="referee",
            output=m.MoveResponse,
        )
        async def make_move(msg: m.MoveRequest, ctx: CallContext) -> dict:
            """Pick a number 1-5 for a best-of-5 round (MOVE_REQUEST → MOVE_RESPONSE)."""
            self._check_addressee(msg)
            record = self._match(msg)
            state = msg.game_state
            role = str(state.get("your_role") or record.get("bo5_role") or "ODD").upper()
            opponent = record.get("opponent_id")
            me = self._me(record)
            this_match = _opponent_moves_in(state.get("previous_rounds"), me) or record.get("opponent_moves", [])
            situation = MoveSituation(
                player_id=me or self.name,
                opponent_id=opponent,
                match_id=msg.match_id,
                role=role,
                game_round=msg.game_round,
                scores=state.get("scores") or {},
                opponent_moves=self.memory.move_history(opponent) + list(this_match),
                my_moves=list(record.get("my_moves", [])),
                recent_matches=self.memory.matches[-5:],
                budget=time_budget(
                    msg.deadline, msg.time_limit_seconds, self.config.decision_cap, self.config.safety_margin
                ),
            )
            number, how = await self.decide(
                "choose_move", situation, lambda: number_of_parity(self.rng.choice(PARITIES), self.rng), _valid_move
            )
            record.setdefault("my_moves", []).append(number)
            record.update(state="PLAYING", bo5_role=role, decided_by=how)
            self._activate()
            fields = self._game_fields(msg)
            fields.update(game_round=msg.game_round, move={"number": number})
            return self._reply(msg, "MOVE_RESPONSE", fields, ctx)

        @tool("notify_round_result", m.RoundResult, message_types=("ROUND_RESULT",), auth="referee")
        async def notify_round_result(msg: m.RoundResult, ctx: CallContext) -> dict:
            """The outcome of one best-of-5 round (ROUND_RESULT → ACK)."""
            record = self._match(msg)
            me = self._me(record)
            for pid, number in msg.moves.items():
                if pid != me and isinstance(number, int):
                    record.setdefault("opponent_moves", []).append(number)
                    record.setdefault("opponent_id", pid)
            record["scores"] = msg.scores
            return self._ack(msg, ctx)

        @tool(
            "notify_match_result",
            m.GameOver,
            aliases=("notify_game_over",),
            message_types=("GAME_OVER",),
            auth="referee",
        )
        async def notify_match_result(msg: m.GameOver, ctx: CallContext) -> dict:
            """The match is over: remember it and learn from it (GAME_OVER → ACK)."""
            self._finish_match(msg)
            return self._ack(msg, ctx)

        @tool("notify_game_error", m.GameErrorNotice, message_types=("GAME_ERROR",), auth="referee")
        async def notify_game_error(msg: m.GameErrorNotice, ctx: CallContext) -> dict:
            """A referee tells us we did something wrong (GAME_ERROR → ACK)."""
            self.memory.record_error(
                {
                    "at": msg.timestamp,
                    "match_id": msg.match_id,
                    "error_code": msg.error_code,
                    "description": msg.error_description,
                    "consequence": msg.consequence,
                }
            )
            self.echo(f"{self.name}: GAME_ERROR {msg.error_code} in {msg.match_id}: {msg.error_description}")
            return self._ack(msg, ctx)

        @tool(
            "notify_round",
            m.RoundAnnouncement,
            message_types=("ROUND_ANNOUNCEMENT",),
            auth="league_manager",
        )
        async def notify_round(msg: m.RoundAnnouncement, ctx: CallContext) -> dict:
            """A round starts (ROUND_ANNOUNCEMENT → ACK)."""
            mine = _matches_of(msg.matches, self.player_id)
            # Without an id (not registered: a practice run of /check/) none of the rows can be
            # told to be ours, so the round counts as not announced to us.
            if msg.round_id is not None and self.player_id is not None:
                self.announced[str(msg.round_id)] = {str(x.get("match_id")): x for x in mine}
                while len(self.announced) > ANNOUNCED_ROUNDS_KEPT:
                    self.announced.pop(next(iter(self.announced)))
            self.memory.league["current_round"] = msg.round_id
            self.memory.league["my_matches"] = mine
            self._activate()
            return self._ack(msg, ctx)

        @tool(
            "update_standings",
            m.StandingsUpdate,
            message_types=("LEAGUE_STANDINGS_UPDATE",),
            auth="league_manager",
        )
        async def update_standings(msg: m.StandingsUpdate, ctx: CallContext) -> dict:
            """New standings after a round (LEAGUE_STANDINGS_UPDATE → ACK)."""
            self.memory.standings = msg.standings
            self.save()
            return self._ack(msg, ctx)

        @tool(
            "notify_round_completed",
            m.RoundCompleted,
            message_types=("ROUND_COMPLETED",),
            auth="league_manager",
        )
        async def notify_round_completed(msg: m.RoundCompleted, ctx: CallContext) -> dict:
            """A round is over (ROUND_COMPLETED → ACK)."""
            self.memory.league["rounds_completed"] = msg.round_id
            self.memory.league["next_round_id"] = msg.next_round_id
            return self._ack(msg, ctx)

        @tool(
            "notify_league_completed",
            m.LeagueCompleted,
            message_types=("LEAGUE_COMPLETED",),
            auth="league_manager",
        )
        async def notify_league_completed(msg: m.LeagueCompleted, ctx: CallContext) -> dict:
            """The league is over (LEAGUE_COMPLETED → ACK); the player shuts down once its
            matches in play are told (``_shutdown_once_told``)."""
            if msg.final_standings:
                self.memory.standings = msg.final_standings
            self.memory.league.update(champion=msg.champion, completed_at=msg.timestamp)
            champion = (msg.champion or {}).get("player_id")
            mine = next((r for r in msg.final_standings if r.get("player_id") == self.player_id), None)
            ended = getattr(msg, "league_status", None)  # CANCELLED or DELETED: the organiser ended it
            if ended:
                self.echo(f"{self.name}: league {str(ended).lower()} ({getattr(msg, 'reason', None) or 'no reason'})")
            else:
                self.echo(
                    f"{self.name}: league completed; champion {champion}"
                    + (f"; we finished #{mine.get('rank')} with {mine.get('points')} points" if mine else "")
                )
            self.save()
            if not self.in_play:
                self.shutdown()
            elif self._closing is None:
                self._closing = asyncio.create_task(self._shutdown_once_told(), name=f"{self.name}-closing")
            return self._ack(msg, ctx)

        @tool(
            "get_player_state",
            envelope=False,
            aliases=("get_my_state",),
            message_types=("GET_PLAYER_STATE",),
            output=m.PlayerState,
        )
        async def get_player_state(msg: Any, ctx: CallContext) -> dict:
            """This player's identity, lifecycle, strategy, statistics and history."""
            return self.toolset.message("PLAYER_STATE", **self.state())

        return ts

    def state(self) -> dict[str, Any]:
        """Everything but the secrets."""
        strategy_stats = getattr(self.strategy, "stats", None)
        return {
            "player_id": self.player_id,
            "display_name": self.name,
            "league_id": self.league_id,
            "lifecycle": self.lifecycle,
            "endpoint": self.endpoint,
            "strategy": self.strategy.name,
            "strategy_stats": dict(strategy_stats) if strategy_stats else {},
            "matches_in_play": sorted(self.in_play),
            **self.memory.to_dict(),
        }

    async def _shutdown_once_told(self) -> None:
        """After LEAGUE_COMPLETED: shut down once the matches in play are told, or after
        ``LAST_RESULTS_GRACE`` (a match whose GAME_OVER never comes does not hold us)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + LAST_RESULTS_GRACE
        while self.in_play and (left := until - loop.time()) > 0:
            self._told.clear()
            try:
                await asyncio.wait_for(self._told.wait(), left)
            except TimeoutError:
                break
        self.save()
        self.shutdown()

    def _finish_match(self, msg: m.GameOver) -> None:
        self._told.set()
        league_id = msg.league_id or self.league_id
        if msg.match_id not in self.in_play and self.memory.has_match(league_id, msg.match_id):
            # The same GAME_OVER again: the referee did not get our ACK (a lost reply, a relay
            # restarting) and sent it once more. A match counts once.
            log.info("%s: %s told again; already counted", self.name, msg.match_id)
            return
        record = self.in_play.pop(msg.match_id, {"match_id": msg.match_id})
        if msg.player_id is not None:
            record.setdefault("addressed_as", str(msg.player_id))
        me = self._me(record)
        result = msg.game_result
        status = str(result.get("status", "")).upper()
        winner = result.get("winner_player_id", result.get("winner"))
        choices = result.get("choices") if isinstance(result.get("choices"), dict) else {}
        opponent = record.get("opponent_id") or next((p for p in choices if p != me), None)
        if status == "DRAW":
            outcome, points = "DRAW", DRAW_POINTS
        elif winner is not None and winner == me:
            outcome, points = "WIN", WIN_POINTS
        elif status == "TECHNICAL_LOSS":
            outcome, points = "TECHNICAL_LOSS", LOSS_POINTS
        else:
            outcome, points = "LOSS", LOSS_POINTS
        opponent_moves = record.get("opponent_moves") or _opponent_moves_in(result.get("rounds"), me)
        entry = {
            "match_id": msg.match_id,
            "round_id": record.get("round_id", msg.round_id),
            "league_id": msg.league_id or self.league_id,
            "player_id": me,  # the seat we were told the outcome as (league/bench/told.py reads it)
            "game_type": msg.game_type or record.get("game_type"),
            "opponent_id": opponent,
            "role": record.get("bo5_role") or record.get("role"),
            "my_choice": choices.get(me, record.get("my_choice")),
            "opponent_choice": choices.get(opponent) if opponent else None,
            "drawn_number": result.get("drawn_number"),
            "my_moves": record.get("my_moves"),
            "opponent_moves": opponent_moves or None,
            "result": outcome,
            "points": points,
            "reason": result.get("reason"),
            "decided_by": record.get("decided_by"),
            "finished_at": msg.timestamp,
        }
        self.memory.record_match({k: v for k, v in entry.items() if v is not None})
        # Lost on time or by invalid moves three times running: we are failing, say so.
        if outcome == "TECHNICAL_LOSS":
            self.failures += 1
            if self.failures >= FAILURES_TO_SUSPEND:
                self._set_lifecycle(Lifecycle.SUSPENDED)
        else:
            self.failures = 0
            if self.lifecycle == Lifecycle.SUSPENDED:
                self._set_lifecycle(Lifecycle.ACTIVE)
        self.save()
        detail = f"chose {entry.get('my_choice')}, number {entry.get('drawn_number')}" if entry.get("my_choice") else ""
        self.echo(f"{self.name}/{me}: {msg.match_id} vs {opponent}: {outcome} {detail}".rstrip())


_ABSENT = object()
_SENDERS: dict[str, tuple[str, str | None]] = {}


def _parse_sender(sender: Any) -> tuple[str, str | None]:
    """``parse_sender``, remembered: a player hears from the LM and a few referees, and the
    regular expression was a third of authenticating each call. Bad senders are never kept."""
    known = _SENDERS.get(sender) if type(sender) is str else None
    if known is None:
        known = parse_sender(sender)  # raises LeagueError (E002) for a malformed sender
        if type(sender) is str:
            if len(_SENDERS) >= 256:  # many referees over a long life: start again
                _SENDERS.clear()
            _SENDERS[sender] = known
    return known


_COROUTINE_FUNCTIONS: dict[Any, bool] = {}


def _is_coroutine_function(func: Any) -> bool:
    """``inspect.iscoroutinefunction``, remembered for a strategy's methods: it unwraps and
    inspects the method anew on every call, a tenth of a choose_parity call's own work."""
    if type(func) is not MethodType:
        return inspect.iscoroutinefunction(func)
    known = _COROUTINE_FUNCTIONS.get(func.__func__)  # what a bound method is depends on its function only
    if known is None:
        if len(_COROUTINE_FUNCTIONS) >= 256:  # functions made on the fly: do not keep them all
            _COROUTINE_FUNCTIONS.clear()
        known = _COROUTINE_FUNCTIONS[func.__func__] = inspect.iscoroutinefunction(func)
    return known


def _field(msg: Any, name: str) -> Any:
    """``getattr(msg, name, None)`` for a received message, an extra field (league.v2 agents
    add their own) included, but cheap when the field is absent: pydantic's ``__getattr__``
    raises AttributeError for that, which cost more than the rest of an LM notification's ACK.
    """
    value = getattr(msg, "__dict__", {}).get(name, _ABSENT)  # a declared field (pydantic keeps them there)
    if value is not _ABSENT:
        return value
    extra = getattr(msg, "__pydantic_extra__", None)
    return extra.get(name) if isinstance(extra, dict) else getattr(msg, name, None)


def _matches_of(matches: list[dict[str, Any]], player_id: str | None) -> list[dict[str, Any]]:
    """The matches (rows of a ROUND_ANNOUNCEMENT, 50 in a 100-player league) where
    ``player_id`` is player A or B. Two comparisons, not a tuple per row and ``in``: a fifth
    cheaper, and what decides is the same equality."""
    return [x for x in matches if x.get("player_A_id") == player_id or x.get("player_B_id") == player_id]


def _mcp_hint(url: str) -> str:
    """What to say of a League Manager URL whose path is not /mcp: ``; did you mean …/mcp?``."""
    parts = urlsplit(url)
    if parts.path.rstrip("/").endswith("/mcp"):
        return ""
    return f"; did you mean {parts.scheme}://{parts.netloc}/mcp?"


def _valid_parity(raw: Any) -> str | None:
    return raw if raw in PARITIES else None


def _valid_move(raw: Any) -> int | None:
    return raw if isinstance(raw, int) and not isinstance(raw, bool) and 1 <= raw <= 5 else None


def _opponent_moves_in(rounds: Any, player_id: str | None) -> list[int]:
    """The opponent's numbers from a list of round records ({"moves": {"P01": 3, "P02": 2}, …})."""
    found: list[int] = []
    if not isinstance(rounds, list):
        return found
    for entry in rounds:
        moves = entry.get("moves") if isinstance(entry, dict) else None
        if isinstance(moves, dict):
            found.extend(v for k, v in moves.items() if k != player_id and isinstance(v, int))
    return found


class PlayerHost:
    """Serves N players from one process: one uvicorn server bound to N sockets, the player
    picked by the local port; one AgentClient and one thread pool shared by all."""

    def __init__(self, players: list[Player], *, register: bool = True, stay: bool = False) -> None:
        self.players = players
        self.register = register
        self.stay = stay
        self.by_port: dict[int, Player] = {}
        self.client: AgentClient | None = None
        self.executor = ThreadPoolExecutor(max_workers=min(32, 4 + len(players)), thread_name_prefix="strategy")
        for player in players:
            player.executor = player.executor or self.executor
        self._tasks: list[asyncio.Task] = []
        self._uvicorn: Any = None
        self.app = make_asgi_app(self._resolve, on_startup=[self._startup], on_shutdown=[self._shutdown])

    @classmethod
    def build(
        cls,
        config: PlayerConfig,
        count: int = 1,
        *,
        register: bool = True,
        stay: bool = False,
        echo: Callable[[str], None] | None = None,
        warn: Callable[[str], None] | None = None,
        strategies: Sequence[str] = (),
    ) -> PlayerHost:
        """``count`` players from one config: names Alpha-1 … and ports port … port+count-1.

        ``strategies``: a mix to deal out in turn (player i plays ``strategies[i % len]``), so one
        process can host a class's worth of different players; by default every player plays
        ``config.strategy``."""
        mix = list(strategies) if strategies else [config.strategy]
        players = []
        for index in range(count):
            name = config.name if count == 1 else f"{config.name}-{index + 1}"
            port = config.port + index if config.port else 0
            strategy = mix[index % len(mix)]
            # Options (an LLM's model, say) are config.strategy's, not the rest of the mix's.
            options = config.strategy_options if strategy == config.strategy else {}
            players.append(
                Player(
                    replace(config, name=name, port=port, strategy=strategy, strategy_options=options),
                    echo=echo,
                    warn=warn,
                )
            )
        return cls(players, register=register, stay=stay)

    def _resolve(self, port: int | None) -> McpServer | None:
        player = self.by_port.get(port) if port is not None else None
        return player.server if player else None

    def _bind_ports(self, ports: list[int]) -> None:
        for player, port in zip(self.players, ports, strict=True):
            player.port = port
            self.by_port[port] = player

    async def _startup(self) -> None:
        self.client = AgentClient()
        for player in self.players:
            player.client = self.client
        if self.register:
            for player in self.players:
                if player.config.league_url:
                    self._tasks.append(asyncio.create_task(player.register(), name=f"register-{player.name}"))
        if not self.stay:
            self._tasks.append(asyncio.create_task(self._exit_when_done(), name="exit-when-done"))

    async def _exit_when_done(self) -> None:
        """Once every player has shut down (league completed, or refused), stop serving."""
        await asyncio.gather(*(p.done.wait() for p in self.players))
        await asyncio.sleep(0.2)  # let the last replies go out
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True

    async def _shutdown(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for player in self.players:
            player.save()
        if self.client is not None:
            await self.client.close()
        self.executor.shutdown(wait=False, cancel_futures=True)

    def serve_forever(self, host: str = "127.0.0.1") -> None:
        """Run in the foreground until every player is done (or SIGINT/SIGTERM)."""
        sockets = bind_sockets(host, [p.config.port for p in self.players])
        self._bind_ports([s.getsockname()[1] for s in sockets])
        self._uvicorn = make_server(self.app)
        self._uvicorn.config.timeout_graceful_shutdown = GRACEFUL_SHUTDOWN
        self._uvicorn.run(sockets=sockets)

    def start_in_thread(self, host: str = "127.0.0.1") -> ThreadedServer:
        """Serve from a background thread (tests); stop it with ``.stop()`` on the result."""
        server = ThreadedServer(self.app, host=host, ports=[p.config.port for p in self.players], ws="none")
        self._bind_ports(server.ports)
        self._uvicorn = server.server
        self._uvicorn.config.timeout_graceful_shutdown = GRACEFUL_SHUTDOWN
        return server.start()
