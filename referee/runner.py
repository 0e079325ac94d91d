"""One match, run against two remote players: the referee's per-match state machine.

WAITING_FOR_PLAYERS → COLLECTING_CHOICES → DRAWING_NUMBER → (COLLECTING_CHOICES …) → FINISHED.
The runner owns timing, retries, invalid-move handling, technical losses and the match log;
the game's rules (:mod:`referee.games`) decide what to ask and who won.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from leagueproto.client import AgentClient, CallFailed, CallResult, RetryPolicy
from leagueproto.envelope import (
    deadline_in,
    game_error_message,
    make_message,
    new_conversation_id,
    parse_sender,
    utc_now,
)
from leagueproto.errors import ErrorCode, LeagueError
from leagueproto.matchtoken import player_token
from leagueproto.scoring import match_score
from leagueproto.timeouts import Timeouts
from leagueproto.tools import same_token
from referee.games import GameRules, InvalidMove, MoveContext, Request

log = logging.getLogger(__name__)

WAITING_FOR_PLAYERS = "WAITING_FOR_PLAYERS"
COLLECTING_CHOICES = "COLLECTING_CHOICES"
DRAWING_NUMBER = "DRAWING_NUMBER"
FINISHED = "FINISHED"
# The outcome was reached after the match's deadline, or the LM recorded another result of the
# match (the referee was stopped or cut off and the match given to another): no player is told it.
ABANDONED = "ABANDONED"

_OUTCOME_OF_CODE = {
    ErrorCode.TIMEOUT_ERROR: "timeout",
    ErrorCode.CONNECTION_ERROR: "connection_error",
}
_DECLINED = (False, "false", "False", "no", 0)
# The reply each request must be answered with (docs/protocol.md); another message_type is an invalid answer.
RESPONSE_TYPES = {
    "GAME_INVITATION": "GAME_JOIN_ACK",
    "CHOOSE_PARITY_CALL": "CHOOSE_PARITY_RESPONSE",
    "MOVE_REQUEST": "MOVE_RESPONSE",
}
# The field that carries the answer to each request: a reply without it is only an acknowledgement.
ANSWER_FIELDS = {"CHOOSE_PARITY_CALL": "parity_choice", "MOVE_REQUEST": "move"}
_ACK_TYPES = frozenset({"ACK", "ACKNOWLEDGEMENT", "RECEIVED"})
# What an acknowledgement holds besides the envelope and the match's ids.
_ACK_FIELDS = frozenset(
    {"protocol", "message_type", "sender", "timestamp", "conversation_id", "auth_token", "league_id", "round_id"}
    | {"match_id", "player_id", "status", "message", "ok", "accepted", "received", "detail"}
)
# The LM's player ids (P01 … P100). A ``player:<name>`` sender (the pre-registration form) names
# no one else; ``player:P07`` from P03, ``referee:…`` or ``league_manager`` does.
_AGENT_ID = re.compile(r"^P\d+$")


_ONCE = RetryPolicy(retries=0, delay=0.0)


@dataclass(frozen=True)
class Seat:
    player_id: str
    endpoint: str
    display_name: str | None = None


@dataclass(frozen=True)
class MatchSpec:
    """Everything the LM's START_MATCH tells the referee about one match."""

    league_id: str | None
    round_id: int | None
    match_id: str
    game_type: str
    player_a: Seat
    player_b: Seat
    match_token: str | None = None
    timeouts: Timeouts = field(default_factory=Timeouts)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_invalid_moves: int = 3
    standings: Mapping[str, Any] = field(default_factory=dict)
    deadline_at: datetime | None = None  # the LM's match deadline: no outcome is told after it

    @property
    def key(self) -> str:
        return f"{self.league_id or ''}:{self.match_id}"

    def opponent(self, seat: Seat) -> Seat:
        return self.player_b if seat is self.player_a else self.player_a

    @cached_property
    def player_tokens(self) -> dict[str, str]:
        """Each player's own token for this match (leagueproto.matchtoken): the only one it is
        sent, so its opponent holds no token it accepts. Empty without a match token."""
        if not self.match_token:
            return {}
        return {
            seat.player_id: player_token(self.match_token, seat.player_id) for seat in (self.player_a, self.player_b)
        }

    def token_of(self, player_id: str) -> str | None:
        """The token ``player_id`` is sent in every message of the match, and answers with."""
        return self.player_tokens.get(player_id)


@dataclass
class MatchResult:
    """Contract 2's ``result`` object."""

    status: str  # WIN | DRAW | TECHNICAL_LOSS
    winner: str | None
    score: dict[str, int]
    technical_loss: list[str]
    details: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "winner": self.winner,
            "score": dict(self.score),
            "technical_loss": list(self.technical_loss),
            "details": dict(self.details),
        }


class MatchAbandoned(Exception):
    """The match's outcome came after its deadline, or the LM recorded another: told to no one."""


class PlayerFailed(Exception):
    """A player lost technically: no usable answer after the retries, or declined."""

    def __init__(self, player_id: str, reason: str, *, silent: bool = False) -> None:
        super().__init__(f"{player_id}: {reason}")
        self.player_id = player_id
        self.reason = reason
        # No answer at all to the invitation after the retries (no reply in time, no connection):
        # the report says so (``details.silent``) and the LM decides its next matches at once.
        self.silent = silent


def _silent(exc: CallFailed) -> bool:
    """No usable answer at the transport level: no reply in time, no connection, or a reply over
    the size limit (as the LM judges an unreachable agent). A JSON-RPC error is an answer."""
    if exc.rpc_error is not None:
        return False
    return exc.code in (ErrorCode.TIMEOUT_ERROR, ErrorCode.CONNECTION_ERROR) or exc.detail == "reply too large"


_TOKEN_KEYS = ("auth_token", "league_manager_token", "match_token")


def redact(message: Mapping[str, Any]) -> dict[str, Any]:
    """A copy safe to show anyone: bearer tokens are left out.

    Left out, not masked: the LM strips every token field from a reported match log before
    storing it, and finds there are none by one scan of the log's JSON. A masked field ("***")
    made it walk all of every log in Python to drop them, 15 % of its CPU in a league.
    """
    if _TOKEN_KEYS[0] not in message and _TOKEN_KEYS[1] not in message and _TOKEN_KEYS[2] not in message:
        return dict(message)
    return {k: v for k, v in message.items() if k not in _TOKEN_KEYS}


class MatchLog:
    """The ordered record of every message of a match, with timing (a report's match_log)."""

    def __init__(self) -> None:
        self._started = time.perf_counter()
        self.entries: list[dict[str, Any]] = []

    def add(
        self,
        direction: str,
        peer: str | None,
        *,
        method: str | None = None,
        message_type: str | None = None,
        outcome: str = "ok",
        attempt: int = 1,
        latency_ms: float | None = None,
        message: Mapping[str, Any] | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        entries = self.entries
        entry = {
            "seq": len(entries) + 1,
            "at": utc_now(),
            "t_ms": round((time.perf_counter() - self._started) * 1000, 1),
            "direction": direction,
            "peer": peer,
            "method": method,
            "message_type": message_type,
            "outcome": outcome,
            "attempt": attempt,
            "latency_ms": None if latency_ms is None else round(latency_ms, 1),
            "message": redact(message) if message is not None else None,
        }
        if extra:  # ~20 entries a match, almost none with extras: skip merging an empty dict
            entry.update(extra)
        entries.append(entry)
        return entry

    def event(self, name: str, **data: Any) -> None:
        self.add("EVENT", None, message_type=name, attempt=0, message=data)


class MatchRunner:
    """Runs one match; ``run()`` returns its :class:`MatchResult` and never raises for a
    player's misbehaviour (that is a technical loss)."""

    def __init__(
        self,
        spec: MatchSpec,
        rules: GameRules,
        client: AgentClient,
        sender: str | Callable[[], str],
        commit: Callable[[MatchRunner], Awaitable[bool]] | None = None,
    ) -> None:
        self.spec = spec
        # Awaited once the outcome is known and before any player is told it (GAME_OVER): the
        # referee saves its report and has the LM record it there. Only an outcome the LM
        # recorded is told (True); False means the LM holds another result of the match (it was
        # given to another referee while this one was stopped or cut off), so no one is told
        # this one. What a player is told is therefore always what is recorded.
        self.commit = commit
        self.rules = rules
        self.client = client
        self._sender = sender
        self.status = "IDLE"
        self.log = MatchLog()
        self.result: MatchResult | None = None
        self.silent: set[str] = set()  # players that gave no answer at all: told once, not retried
        self.conversation_id = new_conversation_id(f"conv-{spec.match_id.lower()}")
        self.state: Any = rules.new_state(spec.player_a.player_id, spec.player_b.player_id)

    @property
    def sender(self) -> str:
        return self._sender() if callable(self._sender) else self._sender

    @property
    def seats(self) -> tuple[Seat, Seat]:
        return self.spec.player_a, self.spec.player_b

    def _enter(self, status: str) -> None:
        self.status = status
        self.log.event(status)

    # -- the state machine ------------------------------------------------------------------
    async def run(self) -> MatchResult:
        self._enter(WAITING_FOR_PLAYERS)
        failures = await self.run_for_both(self._invite)
        if not failures:
            await self._notify_both(
                lambda seat: self.rules.start_notice(self.state, seat.player_id, self.spec.timeouts.move)
            )
            while not failures and not self.rules.is_finished(self.state):
                self._enter(COLLECTING_CHOICES)
                moves: dict[str, Any] = {}
                failures = await self.run_for_both(lambda seat, m=moves: self._collect_move(seat, m))
                if failures:
                    break
                self._enter(DRAWING_NUMBER)
                notice = self.rules.apply(self.state, moves)
                self.log.event("RESOLVED", **self.rules.details(self.state))
                if notice is not None:
                    await self._notify_both(lambda _seat, n=notice: n)
        if self.spec.deadline_at is not None and datetime.now(UTC) > self.spec.deadline_at:
            self._enter(ABANDONED)
            raise MatchAbandoned(f"{self.spec.match_id}: its deadline {self.spec.deadline_at:%H:%M:%S} passed")
        self.result = self._technical_result(failures) if failures else self._played_result()
        self._enter(FINISHED)
        if self.commit is not None and not await self.commit(self):
            self._enter(ABANDONED)
            raise MatchAbandoned(f"{self.spec.match_id}: the League Manager recorded another result")
        await self._notify_both(self._game_over)
        return self.result

    async def run_for_both(self, step: Callable[[Seat], Awaitable[Any]]) -> list[PlayerFailed]:
        """Run ``step`` for both players at once (A's starts first) and wait for both; returns
        the PlayerFailed of those that failed, in seat order (a silent player is remembered: it
        is told the rest once, not retried). Any other exception, a bug, is raised once both
        steps are done; cancelling the caller (the match, at shutdown) cancels both steps.
        Each turn of a match (the invitations, the moves) is such a step."""
        failures = []
        for outcome in await self._for_both(step):
            if isinstance(outcome, PlayerFailed):
                failures.append(outcome)
                if outcome.silent:
                    self.silent.add(outcome.player_id)
            elif outcome is not None:
                raise outcome
        return failures

    async def _for_both(self, step: Callable[[Seat], Awaitable[Any]]) -> tuple[Exception | None, Exception | None]:
        """Run ``step`` for A and B in parallel and wait for both; what each raised, or None.

        What ``gather(step(a), step(b), return_exceptions=True)`` did, at a lower cost: B's step
        runs as a task, A's in the calling task, so each step of a match makes one task instead of
        two tasks and a gathering future. A starts first, as it did. When the match itself is
        cancelled (shutdown), B's step is cancelled with it.
        """
        a, b = self.seats
        other = asyncio.create_task(step(b))
        first: Exception | None = None
        try:
            await step(a)
        except Exception as exc:
            first = exc
        except BaseException:
            other.cancel()
            raise
        second: Exception | None = None
        try:
            await other  # a cancellation of the match while waiting here cancels ``other`` too
        except Exception as exc:
            second = exc
        return first, second

    def _played_result(self) -> MatchResult:
        outcome = self.rules.outcome(self.state)
        a, b = (seat.player_id for seat in self.seats)
        score = match_score(a, b, outcome.winner)  # a DRAW has no winner
        details = {**self.rules.details(self.state), "reason": outcome.reason}
        return MatchResult(outcome.status, outcome.winner, score, [], details)

    def _technical_result(self, failures: list[PlayerFailed]) -> MatchResult:
        offenders = [f.player_id for f in failures]
        ids = [seat.player_id for seat in self.seats]
        winners = [pid for pid in ids if pid not in offenders]
        winner = winners[0] if len(winners) == 1 else None
        score = match_score(ids[0], ids[1], winner, offenders)
        reason = "; ".join(f"{f.player_id} {f.reason}" for f in failures)
        details = {**self.rules.details(self.state), "reason": f"technical loss: {reason}"}
        if self.silent:
            details["silent"] = sorted(self.silent)
        return MatchResult("TECHNICAL_LOSS", winner, score, offenders, details)

    # -- steps ------------------------------------------------------------------------------
    async def _invite(self, seat: Seat) -> None:
        opponent = self.spec.opponent(seat)
        invalid = 0
        while True:
            message = self._message(
                seat,
                "GAME_INVITATION",
                game_type=self.spec.game_type,
                role_in_match="PLAYER_A" if seat is self.spec.player_a else "PLAYER_B",
                opponent_id=opponent.player_id,
            )
            try:
                result = await self._call(seat, "handle_game_invitation", message, self.spec.timeouts.join)
            except CallFailed as exc:
                raise PlayerFailed(
                    seat.player_id, f"sent no GAME_JOIN_ACK ({exc.code.value}: {exc.detail})", silent=_silent(exc)
                ) from None
            if result.is_error:
                raise PlayerFailed(seat.player_id, f"answered the invitation with {_error_summary(result.reply)}")
            problem = reply_problem(seat.player_id, "GAME_INVITATION", result.reply, self.spec.token_of(seat.player_id))
            if problem is None:
                if result.reply.get("accept", True) in _DECLINED:
                    raise PlayerFailed(seat.player_id, "declined the invitation (accept: false)")
                return
            invalid += 1
            await self._reject(seat, problem, invalid)

    async def _collect_move(self, seat: Seat, moves: dict[str, Any]) -> None:
        opponent = self.spec.opponent(seat)
        timeout = self.spec.timeouts.move
        invalid = 0
        while True:
            context = MoveContext(
                round_id=self.spec.round_id or 0,
                opponent_id=opponent.player_id,
                time_limit_seconds=timeout,
                standings=self.spec.standings.get(seat.player_id),
            )
            request = self.rules.move_request(self.state, seat.player_id, context)
            message = self._message(seat, request.message_type, **request.fields, deadline=deadline_in(timeout))
            try:
                result = await self._call(seat, request.tool, message, timeout)
            except CallFailed as exc:
                # Not ``silent``: a player that joined the match is there, if too slow to decide.
                raise PlayerFailed(
                    seat.player_id, f"gave no answer to {request.message_type} ({exc.code.value}: {exc.detail})"
                ) from None
            if result.is_error:
                problem = InvalidMove(f"answered {request.message_type} with {_error_summary(result.reply)}")
            else:
                problem = deferred_answer(seat.player_id, request, result.reply) or reply_problem(
                    seat.player_id, request.message_type, result.reply, self.spec.token_of(seat.player_id)
                )
                if problem is None:
                    try:
                        moves[seat.player_id] = self.rules.validate_move(self.state, seat.player_id, result.reply)
                        return
                    except InvalidMove as bad:
                        problem = bad
            invalid += 1
            await self._reject(seat, problem, invalid)

    async def _reject(self, seat: Seat, problem: InvalidMove, invalid: int) -> None:
        """The player's last reply was not a valid answer: mark it, tell the player (GAME_ERROR) and
        let it answer again, or, past ``max_invalid_moves``, raise its technical loss."""
        reply_entry = next(
            e for e in reversed(self.log.entries) if e["direction"] == "IN" and e["peer"] == seat.player_id
        )
        reply_entry["outcome"] = "invalid"
        reply_entry["problem"] = problem.description  # what the log (and the match page) says was wrong
        last = invalid > self.spec.max_invalid_moves
        await self._send_game_error(seat, problem, invalid, last)
        if last:
            raise PlayerFailed(seat.player_id, f"sent {invalid} invalid answers (last: {problem.description})")

    async def _send_game_error(self, seat: Seat, problem: InvalidMove, invalid: int, last: bool) -> None:
        allowed = self.spec.max_invalid_moves
        err = LeagueError(problem.code, problem.description, context={"player_id": seat.player_id})
        message = game_error_message(
            err,
            sender=self.sender,
            match_id=self.spec.match_id,
            conversation_id=self.conversation_id,
            affected_player=seat.player_id,
            action_required="none: the match is lost"
            if last
            else f"answer again with {problem.expected or 'a valid move'}",
            retry_count=invalid,
            max_retries=allowed,
            consequence="technical loss" if last else f"technical loss after {allowed + 1} invalid answers",
            auth_token=self.spec.token_of(seat.player_id),
        )
        message.update(league_id=self.spec.league_id, round_id=self.spec.round_id, player_id=seat.player_id)
        await self._deliver(seat, Request("notify_game_error", "GAME_ERROR"), message, self.spec.timeouts.default)

    def _game_over(self, seat: Seat) -> Request:
        assert self.result is not None
        details = dict(self.result.details)
        reason = details.pop("reason", "")
        game_result = {
            "status": self.result.status,
            "winner_player_id": self.result.winner,
            **details,
            "technical_loss": list(self.result.technical_loss),
            "reason": reason,
        }
        return Request(
            "notify_match_result", "GAME_OVER", {"game_type": self.spec.game_type, "game_result": game_result}
        )

    # -- messaging --------------------------------------------------------------------------
    def _message(self, seat: Seat, message_type: str, **fields: Any) -> dict[str, Any]:
        return make_message(
            message_type,
            self.sender,
            conversation_id=self.conversation_id,
            auth_token=self.spec.token_of(seat.player_id),
            league_id=self.spec.league_id,
            round_id=self.spec.round_id,
            match_id=self.spec.match_id,
            player_id=seat.player_id,
            **fields,
        )

    async def _notify_both(self, build: Callable[[Seat], Request | None]) -> None:
        timeout = self.spec.timeouts.game_over if self.status == FINISHED else self.spec.timeouts.default

        async def one(seat: Seat) -> None:
            request = build(seat)
            if request is not None:
                await self._deliver(seat, request, self._message(seat, request.message_type, **request.fields), timeout)

        # _deliver never raises for a player's failure: anything raised here is a bug, re-raised
        # once both notifications are done.
        for outcome in await self._for_both(one):
            if outcome is not None:
                raise outcome

    async def _deliver(self, seat: Seat, request: Request, message: dict[str, Any], timeout: float) -> None:
        """A notification: a failure to deliver is logged, never fatal. A player that gave no
        answer at all in this match gets one try: its retries would hold the match (and its
        round) up for nothing."""
        try:
            await self._call(seat, request.tool, message, timeout, once=seat.player_id in self.silent)
        except CallFailed as exc:
            log.info("%s: %s to %s not delivered: %s", self.spec.match_id, request.message_type, seat.player_id, exc)

    async def _call(
        self, seat: Seat, method: str, message: dict[str, Any], timeout: float, *, once: bool = False
    ) -> CallResult:
        entry = self.log.add(
            "OUT", seat.player_id, method=method, message_type=message["message_type"], message=message
        )
        policy = _ONCE if once else self.spec.retry
        try:
            result = await self.client.call(seat.endpoint, method, message, timeout=timeout, policy=policy)
        except CallFailed as exc:
            entry.update(
                outcome=_OUTCOME_OF_CODE.get(exc.code, "error"),
                attempt=exc.attempts,
                latency_ms=round(exc.latency_ms, 1),
                error=f"{exc.code.value}: {exc.detail}",
            )
            raise
        # Item by item rather than update(**kwargs): no keyword dict per call; same keys, same order.
        entry["attempt"] = result.attempts
        entry["latency_ms"] = round(result.latency_ms, 1)
        entry["dialect"] = result.dialect
        if result.is_error:
            entry["outcome"] = "error"
        self.log.add(
            "IN",
            seat.player_id,
            method=method,
            message_type=result.reply.get("message_type"),
            outcome="error" if result.is_error else "ok",
            attempt=result.attempts,
            latency_ms=result.latency_ms,
            message=result.reply,
        )
        return result

    # -- inspection -------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """The match as ``get_match_state`` shows it: never the players' endpoints, and the log
        only up to the turn being played (:meth:`resolved_log`)."""
        return {
            "league_id": self.spec.league_id,
            "round_id": self.spec.round_id,
            "match_id": self.spec.match_id,
            "game_type": self.spec.game_type,
            "state": self.status,
            "players": [
                {"player_id": seat.player_id, "role_in_match": role}
                for seat, role in zip(self.seats, ("PLAYER_A", "PLAYER_B"), strict=True)
            ],
            "game": self.rules.details(self.state),
            "result": self.result.to_dict() if self.result else None,
            "match_log": self.resolved_log(),
        }

    def resolved_log(self) -> list[dict[str, Any]]:
        """The log without the turn still open: a turn's requests, answers and errors show once it
        is resolved (its RESOLVED event), so no one reading the match (the LM, its pages) can hand
        a player its opponent's answer before it answers itself. The game's details never hold an
        open turn's moves: the rules take them only to resolve the turn."""
        entries = self.log.entries
        if self.result is None:
            for index in range(len(entries) - 1, -1, -1):
                entry = entries[index]
                if entry["direction"] != "EVENT":
                    continue
                if entry["message_type"] == "RESOLVED":
                    break
                if entry["message_type"] == COLLECTING_CHOICES:
                    return entries[: index + 1]
        return list(entries)


def deferred_answer(player_id: str, request: Request, reply: Mapping[str, Any]) -> InvalidMove | None:
    """A reply that only acknowledges the request (empty, an ACK, a status) instead of answering
    it: the player means to answer later, by a call of its own, which the protocol has no room for."""
    answer = ANSWER_FIELDS.get(request.message_type)
    if answer is None or answer in reply:
        return None
    if reply.get("message_type") not in _ACK_TYPES and not set(reply) <= _ACK_FIELDS:
        return None  # an attempt at an answer, however wrong: the game's rules say what is wrong
    return InvalidMove(
        f"player {player_id} answered {request.tool} with no {answer} in its HTTP reply; "
        "answers must be in the reply, not a later call",
        code=ErrorCode.INVALID_MESSAGE_FORMAT,
        expected=f"a {RESPONSE_TYPES[request.message_type]} with {answer} in the reply itself",
    )


def reply_problem(player_id: str, asked: str, reply: Mapping[str, Any], token: str | None = None) -> InvalidMove | None:
    """Why a (non-error) reply to ``asked`` is not an answer from ``player_id``, or None.

    A wrong ``message_type`` is E002. The reply came back from the player's endpoint, so it is the
    player's (docs/protocol.md, "Who an agent is"): a ``player_id`` or ``sender`` naming another
    player id (a fixed id from the agent's own configuration) is logged, not refused; only a sender
    that is no player at all (``referee:…``, ``league_manager``) is E012, and so is an
    ``auth_token`` other than ``token`` (the player's own for the match: an answer carrying its
    opponent's token is not its answer). Fields left out are tolerated here (the game's rules judge
    the move itself), the token included: a reply need not echo one.
    """
    expected = RESPONSE_TYPES.get(asked)
    got = reply.get("message_type")
    if expected is not None and got is not None and got != expected:
        return InvalidMove(
            f"answered {asked} with message_type {got!r} instead of {expected}",
            code=ErrorCode.INVALID_MESSAGE_FORMAT,
            expected=f"a {expected}",
        )
    claimed = reply.get("player_id")
    if claimed is not None and claimed != player_id:
        log.info("%s answered %s calling itself player_id %r (its endpoint says who it is)", player_id, asked, claimed)
    sender = reply.get("sender")
    if sender is not None:
        try:
            kind, ident = parse_sender(sender)
        except LeagueError:  # not an agent's name at all: nobody is impersonated
            kind, ident = "player", player_id
        if kind != "player":
            return _impostor(player_id, "sender", sender)
        if ident != player_id and _AGENT_ID.match(ident or ""):
            log.info("%s answered %s as %r (its endpoint says who it is)", player_id, asked, sender)
    answered_with = reply.get("auth_token")
    if token and answered_with and not same_token(answered_with, token):
        return InvalidMove(
            f"the reply's auth_token is not {player_id}'s token for this match",
            code=ErrorCode.AUTH_TOKEN_INVALID,
            expected=f"{player_id}'s own match token (the one its GAME_INVITATION carried), or none",
        )
    return None


def _impostor(player_id: str, key: str, value: Any) -> InvalidMove:
    return InvalidMove(
        f"the reply's {key} {value!r} is not {player_id}, the player asked",
        code=ErrorCode.AUTH_TOKEN_INVALID,
        expected=f"a reply as {player_id} (sender 'player:{player_id}')",
    )


def _error_summary(reply: Mapping[str, Any]) -> str:
    kind = reply.get("message_type") or "an error"
    code = reply.get("error_code") or "?"
    return f"{kind} {code}: {reply.get('error_description') or 'no description'}"
