"""Check my agent: a practice run of everything a league sends a player, reported step by step.

``run_check(endpoint)`` plays what a one-round league would with the agent at ``endpoint``: the
ROUND_ANNOUNCEMENT, a practice match against a house bot run by the referee's own runner and game
rules (GAME_INVITATION, the move requests, GAME_ERROR when an answer is invalid, GAME_OVER), then
LEAGUE_STANDINGS_UPDATE, ROUND_COMPLETED and LEAGUE_COMPLETED. Each message sent becomes a
:class:`Step`: the message, the reply, its latency, a verdict (ok / warn / fail) and, when it is
not ok, the fix in one sentence with the section of docs/protocol.md to read.

Two verdicts come of it (``Report.plays_match``, ``Report.takes_notices``): whether the agent can
play a match (a failure there costs matches in a league), and whether it takes the four league
notices (advice: a notice it cannot take costs no match). The agent is called by the id given, else
the id it is registered under on this LM (``find_registration``), else by the id it announces in its
first reply. When it is registered in a league here that is not finished, the practice
LEAGUE_COMPLETED is not sent: it must not be able to end that league for the agent.

It registers nothing and writes nothing: no league, player, match or event row is involved (the
messages name the league ``check_practice``). It shows only league agents' messages: a reply that
is none (some other service at that address) is a failure with nothing of it kept (``HouseClient``).
The page (``/check/``) and ``manage.py checkagent`` are thin callers: they apply the leagues'
endpoint policy first (``endpoint_refusal``), and the page its per-address limit (``take_check_slot``).
"""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from django.conf import settings
from django.db import DatabaseError

from league.endpoints import NetworksPolicy
from league.ratelimit import Bucket, limiter
from league.standings import standing_dict
from leagueproto.client import NO_RETRY, AgentClient, CallFailed, CallResult
from leagueproto.envelope import PROTOCOL_VERSION, invisible_in, make_message, parse_timestamp
from leagueproto.errors import ErrorCode, LeagueError, see
from leagueproto.scoring import ResultRow, compute_standings
from leagueproto.timeouts import DEFAULT_TIMEOUTS, MOVE_CALLS, Timeouts
from referee.games import GAMES, get_game
from referee.runner import MatchRunner, MatchSpec, Seat, redact

OK, WARN, FAIL = "ok", "warn", "fail"
LEAGUE_ID = "check_practice"
AGENT_ID = "P01"  # the agent under test, unless it is registered here or announces another id
HOUSE_ID = "P02"
HOUSE_NAME = "House bot"
HOUSE_ENDPOINT = "house:bot"  # answered in-process by ``HouseClient``, never over the network
SENDER = "league_manager"
# The ROUND_ANNOUNCEMENT names a referee_endpoint as a league does (strict agents refuse null): the
# page gives the LM's own /mcp URL, the command LM_BASE_URL's, else the LM's address in the README.
DEFAULT_REFEREE_ENDPOINT = "http://127.0.0.1:8000/mcp"
# The League Manager's notices: an agent that cannot take them still plays every match of a league.
NOTICES = frozenset({"ROUND_ANNOUNCEMENT", "LEAGUE_STANDINGS_UPDATE", "ROUND_COMPLETED", "LEAGUE_COMPLETED"})
PASS = "pass"
ENVELOPE = ("protocol", "message_type", "sender", "timestamp", "conversation_id")
# Seconds the check waits for each reply: the protocol's limits, a move, a report and any other
# call shortened (a check is not a tournament: a few seconds show an answer comes back).
TIMEOUTS = replace(DEFAULT_TIMEOUTS, move=10.0, report=5.0, default=5.0)

# Sections of docs/protocol.md the fixes point to.
SEE_WIRE = see("wire-format")
SEE_ENVELOPE = see("the-envelope")
SEE_PLAYER_TOOLS = see("tools-a-player-serves")
SEE_MATCH = see("how-a-match-runs")
SEE_LM_SENDS = see("messages-the-league-manager-sends")


@dataclass
class Step:
    """One message the check sent and what came of it."""

    message_type: str
    method: str
    sent: dict[str, Any]
    reply: dict[str, Any] | None = None
    latency_ms: float | None = None
    verdict: str = OK
    note: str = ""  # what happened, in a few words
    fix: str | None = None  # for warn / fail: what to change, one sentence
    see: str | None = None  # the section of docs/protocol.md to read (``docs/protocol.md#anchor``)
    error_code: str | None = None  # when no usable reply came: the client's E0xx (E001 timeout …)
    rpc_code: int | None = None  # when the agent answered a JSON-RPC error: its code
    not_agent: bool = False  # the reply was no league agent's message: judged, never shown
    also: int = 0  # this warning's fix recurs on this many later steps (said here only)
    same_as: int | None = None  # the number of the step that already gave this warning's fix

    @property
    def shown_note(self) -> str:
        """The note as reported: with how many later steps share its fix."""
        return f"{self.note} (also on {self.also} other replies)" if self.also else self.note

    @property
    def anchor(self) -> str | None:
        return self.see.partition("#")[2] if self.see else None

    def judge(self, verdict: str, note: str, fix: str | None = None, where: str | None = None) -> None:
        """Record a finding; the worst one stays (a fail is never turned back into a warn)."""
        rank = {OK: 0, WARN: 1, FAIL: 2}
        if rank[verdict] < rank[self.verdict]:
            return
        self.verdict, self.note, self.fix, self.see = verdict, note, fix, where


@dataclass
class Report:
    endpoint: str
    game_type: str
    player_id: str
    steps: list[Step] = field(default_factory=list)
    match_result: dict[str, Any] | None = None
    stopped: str | None = None  # why the check ended early, if it did
    seconds: float = 0.0
    id_source: str = "default"  # how player_id was chosen: given, registered, announced or default
    id_warning: str | None = None  # said once when the check adopted the id the agent announced
    skipped: list[str] = field(default_factory=list)  # messages not sent, each with why

    @property
    def plays_match(self) -> str:
        """``pass`` or ``fail``: the practice match and its messages (what costs matches)."""
        failed = self.stopped or any(s.verdict == FAIL for s in self.steps if s.message_type not in NOTICES)
        return FAIL if failed else PASS

    @property
    def takes_notices(self) -> str:
        """``pass`` or ``warn``: the league notices (a notice not taken costs no match)."""
        return WARN if any(s.verdict != OK for s in self.steps if s.message_type in NOTICES) else PASS

    @property
    def verdict(self) -> str:
        if self.plays_match == FAIL:
            return FAIL
        return WARN if self.id_warning or any(s.verdict != OK for s in self.steps) else OK

    @property
    def passed(self) -> bool:
        """No step failed (warnings are advice)."""
        return self.verdict != FAIL

    def counts(self) -> dict[str, int]:
        return {v: sum(1 for s in self.steps if s.verdict == v) for v in (OK, WARN, FAIL)}

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(
            verdict=self.verdict,
            passed=self.passed,
            counts=self.counts(),
            plays_match=self.plays_match,
            takes_notices=self.takes_notices,
        )
        return data


# -- the house bot --------------------------------------------------------------------------
def house_reply(method: str, message: dict[str, Any]) -> dict[str, Any]:
    """What the house bot answers: it joins, plays at random and acknowledges everything else."""
    me = str(message.get("player_id") or HOUSE_ID)  # the seat the referee asks it as
    fields: dict[str, Any] = {"match_id": message.get("match_id"), "player_id": me}
    kind = message.get("message_type")
    if kind == "GAME_INVITATION":
        reply_type, fields["accept"] = "GAME_JOIN_ACK", True
    elif kind == "CHOOSE_PARITY_CALL":
        reply_type, fields["parity_choice"] = "CHOOSE_PARITY_RESPONSE", secrets.choice(("even", "odd"))
    elif kind == "MOVE_REQUEST":
        reply_type, fields["move"] = "MOVE_RESPONSE", {"number": secrets.randbelow(5) + 1}
        fields["game_round"] = message.get("game_round")
    else:
        reply_type, fields["status"] = "ACK", "received"
    return make_message(reply_type, f"player:{me}", conversation_id=message.get("conversation_id"), **fields)


# -- what the check shows of a reply -----------------------------------------------------------
# The check calls whatever address it is given inside the leagues' networks. What comes back is
# kept (shown, quoted in the referee's GAME_ERROR or GAME_OVER, in the match log) only when it is
# a league agent's message, never what another service there answered. A player answers with one
# of these league.v2 messages (docs/protocol.md, "Tools a player serves"), or, to a request, with
# at least the answer's field.
PLAYER_REPLIES = frozenset(
    {"ACK", "GAME_JOIN_ACK", "CHOOSE_PARITY_RESPONSE", "MOVE_RESPONSE", "GAME_ERROR", "LEAGUE_ERROR"}
)
ANSWER_FIELDS = {"GAME_INVITATION": "accept", "CHOOSE_PARITY_CALL": "parity_choice", "MOVE_REQUEST": "move"}
NOT_AN_AGENT = "not a league agent's message"


def is_agent_reply(asked: str, reply: Any) -> bool:
    """Whether ``reply`` to a ``asked`` message is a league agent's message: a JSON object in
    league.v2 (``protocol`` left out is read as league.v2) whose ``message_type`` is one a player
    answers with, or, without a ``message_type``, that carries the answer ``asked`` asks for. To
    a message that asks for no answer (GAME_OVER, a notice), any reply in a player's envelope
    (``sender`` ``player:…``) is one, whatever its ``message_type``."""
    if not isinstance(reply, dict) or reply.get("protocol", PROTOCOL_VERSION) != PROTOCOL_VERSION:
        return False
    kind = reply.get("message_type")
    if asked not in ANSWER_FIELDS and isinstance(reply.get("sender"), str) and reply["sender"].startswith("player:"):
        return True
    if kind is None:
        return ANSWER_FIELDS.get(asked, "") in reply
    return isinstance(kind, str) and kind in PLAYER_REPLIES


def field_names(message: Any) -> set[str]:
    """Every key of ``message``, nested ones included."""
    if isinstance(message, dict):
        return set(message) | {name for value in message.values() for name in field_names(value)}
    if isinstance(message, list):
        return {name for item in message for name in field_names(item)}
    return set()


def rpc_error_words(asked: dict[str, Any], error: dict[str, Any]) -> str:
    """A JSON-RPC error in the check's own words: its code, and which of OUR field names its text
    mentions (those of the message sent, and the answer it asks for), never the text itself."""
    code = error.get("code")
    words = f"JSON-RPC error {code}" if isinstance(code, int) and not isinstance(code, bool) else "JSON-RPC error"
    text = f"{error.get('message', '')} {error.get('data', '')}"
    if "unknown tool" in text.lower():  # MCP servers answer a tool they lack -32602 "Unknown tool"
        return f"{words}: unknown tool"
    ours = field_names(asked) | set(ANSWER_FIELDS.values())
    named = sorted(name for name in ours if re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text))
    return f"{words} naming {', '.join(named)}" if named else words


def own_words(detail: str) -> str:
    """The client's account of a failed call without the other side's words (a JSON-RPC error's
    message, a bad status line, a redirect's target, a socket's error text): any service's."""
    if detail.startswith("JSON-RPC error"):
        code = detail.partition(":")[0]  # MCP servers answer a tool they lack -32602 "Unknown tool"
        return f"{code}: unknown tool" if "unknown tool" in detail.lower() else code
    if detail.startswith("bad HTTP reply"):
        return "not an HTTP reply"
    if detail.startswith("redirect to"):
        return "a redirect, not followed"
    if detail.startswith("connection failed: "):
        return "connection failed: " + detail.removeprefix("connection failed: ").partition(":")[0]
    return detail


class HouseClient(AgentClient):
    """The check's client: the house bot answers in this process, the agent over HTTP. A reply
    that is no league agent's message fails like a malformed one (E002, ``NOT_AN_AGENT``), and a
    failure is told in the client's own words, so nothing another service said goes further."""

    async def call(self, endpoint: str, method: str, params: dict[str, Any], **kwargs: Any) -> CallResult:
        if endpoint == HOUSE_ENDPOINT:
            return CallResult(house_reply(method, params), False, 0.0, 1, "in-process")
        try:
            result = await super().call(endpoint, method, params, **kwargs)
        except CallFailed as exc:
            raise CallFailed(
                exc.code,
                rpc_error_words(params, exc.rpc_error) if exc.rpc_error else own_words(exc.detail),
                attempts=exc.attempts,
                latency_ms=exc.latency_ms,
                http_status=exc.http_status,
            ) from None
        if not is_agent_reply(str(params.get("message_type")), result.reply):
            raise CallFailed(
                ErrorCode.INVALID_MESSAGE_FORMAT, NOT_AN_AGENT, attempts=result.attempts, latency_ms=result.latency_ms
            )
        return result


# -- judging replies ------------------------------------------------------------------------
def _not_an_agent(step: Step, *, strict: bool = False) -> None:
    """A reply that is no league message: nothing of it was kept. To a message that asks for no
    answer (GAME_OVER, a notice) any reply will do, unless ``strict`` (the first message: it
    decides whether the endpoint is an agent at all)."""
    step.not_agent = True
    if step.message_type not in ANSWERS and not strict:
        step.note = "answered (any reply will do; this one is no league message, so it is not shown)"
        return
    expected = ANSWERS.get(step.message_type, "ACK")
    step.judge(
        FAIL,
        "the reply is not a league agent's message (it is not shown)",
        f"Answer {step.message_type} with a league.v2 message (message_type {expected}, or GAME_ERROR to refuse it) "
        "as the JSON-RPC result.",
        SEE_PLAYER_TOOLS,
    )


def _failed_call(step: Step, code: str, detail: str) -> None:
    """A call that got no usable reply (``code``: the E0xx the client gave it)."""
    step.error_code = code
    if detail == NOT_AN_AGENT:
        _not_an_agent(step)
        return
    if rpc := RPC_ERROR.match(detail):
        _rpc_error(step, int(rpc["code"]), (rpc["named"] or "").split(", ") if rpc["named"] else [])
        return
    # The client's words when the direct form and then tools/call both found no such tool
    # (tools/call answers -32602 "Unknown tool" in MCP servers, -32601 in others).
    if "no method or tool" in detail or "unknown tool" in detail.lower() or "-32601" in detail:
        step.judge(
            FAIL,
            f"your agent has no tool {step.method}",
            f"Serve the tool {step.method} (JSON-RPC method {step.method!r}, or through tools/call) and "
            f"answer {step.message_type} with a league message.",
            SEE_PLAYER_TOOLS,
        )
    elif code == "E001":
        step.judge(
            FAIL,
            f"no reply in time ({detail})",
            "Answer every call in the HTTP response itself, within the step's time limit (5 s for an "
            "invitation or a notice): do the slow work after replying.",
            SEE_MATCH,
        )
    elif code == "E009":
        step.judge(
            FAIL,
            f"could not connect ({detail})",
            "Make your agent listen on the address you gave (host, port and the path /mcp) and make "
            "sure this machine can reach it.",
            see("player-side"),
        )
    elif code == "E010":
        step.judge(
            FAIL,
            f"your agent crashed ({detail})",
            f"Your agent answered an HTTP 5xx to {step.message_type}: read its log for the exception "
            "and answer with a league message instead.",
            SEE_PLAYER_TOOLS,
        )
    else:
        step.judge(
            FAIL,
            f"unusable reply ({detail})",
            "Answer with a JSON-RPC 2.0 response whose result is the reply message as a JSON object "
            '({"jsonrpc": "2.0", "id": <the id>, "result": {…}}).',
            SEE_WIRE,
        )


RPC_ERROR = re.compile(r"^JSON-RPC error (?P<code>-?\d+)(?: naming (?P<named>[\w, ]+))?$")


def _rpc_error(step: Step, code: int, named: list[str]) -> None:
    """The agent answered a JSON-RPC error (``named``: our field names its message mentions)."""
    step.rpc_code = code
    mentions = f", naming {', '.join(named)}" if named else ""
    answer = ANSWER_FIELDS.get(step.message_type)
    if code == -32602:
        note = f"your agent rejected our params (JSON-RPC -32602 invalid params{mentions})"
        if answer and answer in named and answer not in step.sent:
            fix = (
                f"Your tool {step.method} wants {answer} among its arguments, but {answer} is what your "
                f"answer carries: take {step.message_type} as the league sends it and put {answer} in the reply."
            )
        elif named:
            fix = (
                f"Make your tool {step.method} accept {step.message_type} as the league sends it: its "
                f"{', '.join(named)} as shown above, and fields it does not know."
            )
        else:
            fix = (
                f"Make your tool {step.method} accept {step.message_type} as the league sends it (every "
                "field shown above, and fields it does not know)."
            )
        step.judge(FAIL, note, fix, SEE_LM_SENDS if step.message_type in NOTICES else SEE_PLAYER_TOOLS)
    elif code == -32603:
        step.judge(
            FAIL,
            f"your agent crashed: internal error in its handler for {step.method} (JSON-RPC -32603{mentions})",
            f"Read your agent's log for the exception its {step.method} handler raised on this "
            f"{step.message_type} and answer with a league message instead.",
            SEE_PLAYER_TOOLS,
        )
    else:
        step.judge(
            FAIL,
            f"your agent answered a JSON-RPC error {code}{mentions}",
            f"Answer {step.message_type} with a league message as the JSON-RPC result, not an error "
            "(a GAME_ERROR as the result refuses it).",
            SEE_PLAYER_TOOLS,
        )


def _refused(step: Step, reply: dict[str, Any], from_league: bool) -> None:
    """The agent answered with a LEAGUE_ERROR / GAME_ERROR."""
    code = str(reply.get("error_code") or "?")
    text = str(reply.get("error_description") or reply.get("error_name") or "no description")
    note = f"your agent refused it: {code} {text}"
    if from_league and code in ("E011", "E012"):
        # A registered agent trusts only its own league's league_manager_token: right to refuse
        # a check that cannot show it, so this is advice, not a failure.
        step.judge(
            WARN,
            note,
            "Your agent checks the league_manager_token (good), and the check cannot show your league's: "
            "run the check before your agent registers to see its answer to this notice.",
            see("player-side"),
        )
        return
    context = reply.get("context") if isinstance(reply.get("context"), dict) else {}
    field_name = context.get("field")
    blame = f" (it objected to {field_name})" if field_name else ""
    step.judge(
        FAIL,
        note,
        f"Accept {step.message_type} exactly as the league sends it{blame}: the fields, the sender "
        f"{step.sent.get('sender')!r} and the bearer token in auth_token.",
        SEE_LM_SENDS if from_league else SEE_MATCH,
    )


def _check_envelope(step: Step, reply: dict[str, Any], expected_type: str | None) -> None:
    """Advice on a reply the league can use: its envelope, its type (only where an answer is owed:
    the course expects no particular reply to GAME_OVER or a notice)."""
    optional = () if expected_type else ("message_type",)
    missing = [name for name in ENVELOPE if name not in reply and name not in optional]
    if missing:
        step.judge(
            WARN,
            f"the reply lacks {', '.join(missing)}",
            f"Put the whole envelope in every reply ({', '.join(ENVELOPE)}).",
            SEE_ENVELOPE,
        )
    elif reply.get("conversation_id") != step.sent.get("conversation_id"):
        step.judge(
            WARN,
            "the reply's conversation_id is not the request's",
            "Answer with the conversation_id of the message you answer.",
            SEE_ENVELOPE,
        )
    elif invisible_in(reply.get("timestamp")):
        # The league removes them on input (a timestamp copied from the course's PDF): it plays,
        # but the agent's own reader of such text would not.
        hidden = ", ".join(invisible_in(reply.get("timestamp")))
        step.judge(
            WARN,
            f"timestamp {reply.get('timestamp')!r} carries {hidden} (the league removes it)",
            "Type the timestamp format again instead of copying it from the course's PDF, or write "
            "timestamps with your language's UTC formatter, such as '2025-01-15T10:30:00Z'.",
            SEE_ENVELOPE,
        )
    else:
        try:
            parse_timestamp(reply.get("timestamp"))
        except LeagueError:
            step.judge(
                WARN,
                f"timestamp {reply.get('timestamp')!r} is not UTC",
                "Write timestamps in UTC ending in 'Z', such as '2025-01-15T10:30:00Z'.",
                SEE_ENVELOPE,
            )
    if expected_type and reply.get("message_type") != expected_type:
        step.judge(
            WARN,
            f"answered with message_type {reply.get('message_type')!r}",
            f"Answer {step.message_type} with message_type {expected_type}.",
            SEE_PLAYER_TOOLS,
        )


# The reply each game request is owed (any reply will do for the other messages).
ANSWERS = {
    "GAME_INVITATION": "GAME_JOIN_ACK",
    "CHOOSE_PARITY_CALL": "CHOOSE_PARITY_RESPONSE",
    "MOVE_REQUEST": "MOVE_RESPONSE",
}


def _invalid_answer(step: Step, problem: str, error: dict[str, Any] | None, game_type: str, player_id: str) -> None:
    """The referee found the reply was no valid answer (``error``: the GAME_ERROR it sent back)."""
    code = (error or {}).get("error_code")
    rules = see(GAMES[game_type].docs_anchor) if game_type in GAMES else see("games")
    if code == "E012":
        fix = (
            f"Answer as the player you were asked as (player_id {player_id!r}, sender 'player:{player_id}'); "
            "if your agent is registered under another id, give that id to the check, or none (it then takes "
            "the id your agent answers with)."
        )
        where = SEE_MATCH
    elif code == "E002":
        fix = f"Answer {step.message_type} in the HTTP reply itself with a {ANSWERS.get(step.message_type, 'ACK')}."
        where = SEE_MATCH
    elif step.message_type == "MOVE_REQUEST":
        fix, where = 'Answer with move {"number": n}, n a whole number from 1 to 5.', rules
    elif step.message_type == "CHOOSE_PARITY_CALL":
        fix, where = 'Answer with parity_choice exactly "even" or "odd" (lower case).', rules
        # A near miss ("choice", "parity") is named: the field name is the defect, not the value.
        near = sorted(k for k in (step.reply or {}) if k != "parity_choice" and ("choice" in k or "parity" in k))
        if near and "parity_choice" not in (step.reply or {}):
            fix = f'Answer with the field parity_choice (your reply has {", ".join(near)}), exactly "even" or "odd".'

    else:
        fix, where = f"Answer {step.message_type} with a {ANSWERS.get(step.message_type, 'ACK')}.", SEE_MATCH
    step.judge(FAIL, f"not a valid answer: {problem}", fix, where)


def judge_reply(step: Step, reply: dict[str, Any], is_error: bool, timeout: float, *, from_league: bool) -> None:
    step.reply = redact(reply)
    if is_error:
        _refused(step, reply, from_league)
        return
    _check_envelope(step, reply, ANSWERS.get(step.message_type))
    if step.latency_ms is not None and step.latency_ms > timeout * 1000 / 2:
        step.judge(
            WARN,
            f"slow: {step.latency_ms:.0f} ms of the {timeout:g} s allowed",
            "Reply sooner: a busy network can push a reply this slow past the limit.",
            SEE_MATCH,
        )


# -- the run ---------------------------------------------------------------------------------
def _limit(message_type: str, timeouts: Timeouts) -> float:
    """Seconds the referee gave a reply to ``message_type``."""
    if message_type == "GAME_INVITATION":
        return timeouts.join
    if message_type in MOVE_CALLS:
        return timeouts.move
    return timeouts.game_over if message_type == "GAME_OVER" else timeouts.default


def match_steps(log: list[dict[str, Any]], peer: str, game_type: str, timeouts: Timeouts = TIMEOUTS) -> list[Step]:
    """The referee's match log, as steps: each OUT to ``peer`` with the IN that answered it."""
    steps: list[Step] = []
    mine = [e for e in log if e.get("peer") == peer]
    for n, entry in enumerate(mine):
        if entry["direction"] != "OUT":
            continue
        step = Step(entry["message_type"], entry["method"], entry["message"], latency_ms=entry.get("latency_ms"))
        steps.append(step)
        answer = mine[n + 1] if n + 1 < len(mine) and mine[n + 1]["direction"] == "IN" else None
        if answer is None:
            code, _, detail = str(entry.get("error") or "E002: no reply").partition(": ")
            _failed_call(step, code, detail)
            continue
        limit = _limit(step.message_type, timeouts)
        judge_reply(step, answer["message"] or {}, answer["outcome"] == "error", limit, from_league=False)
        if answer["outcome"] == "invalid":
            error = next(
                (e["message"] for e in mine[n + 2 :] if e["direction"] == "OUT" and e["message_type"] == "GAME_ERROR"),
                None,
            )
            _invalid_answer(step, str(answer.get("problem", "")), error, game_type, peer)
        elif step.message_type == "GAME_INVITATION" and answer["message"].get("accept", True) in (False, "false"):
            step.judge(FAIL, "declined the invitation", "Answer GAME_JOIN_ACK with accept: true.", SEE_MATCH)
        else:
            _other_name(step, peer)
    return steps


def _other_name(step: Step, asked_as: str) -> None:
    """A reply that names the agent by another id: the league takes it (an agent is its endpoint
    and token, docs/protocol.md "Who an agent is"), so this is advice, not a failure."""
    named = announced_id(step)
    if named is not None and named != asked_as:
        step.judge(
            WARN,
            f"answered as {named}, not {asked_as}",
            f"Answer as the player you were asked as (player_id {asked_as!r}, sender 'player:{asked_as}'): "
            "the league still takes your reply (your endpoint says who you are), but logs the mismatch "
            "and shows it on your page; if your agent is registered under another id, give that id to the check.",
            see("who-an-agent-is"),
        )


@dataclass(frozen=True)
class Registration:
    """The agent's seat on this LM: its id, its league and whether that league is finished."""

    player_id: str
    league_id: str
    finished: bool


def find_registration(endpoint: str) -> Registration | None:
    """The seat of the player at ``endpoint`` (its ``seat_endpoint``, the indexed form every
    registration is stored in) in a league of this LM not finished, else in the latest finished
    one; None when it has none, or when this machine has no league database (the command run on
    a student's own machine)."""
    from league.models import IN_PROGRESS, AgentStatus, League, Player
    from league.seats import seat_endpoint

    players = (
        Player.objects.filter(canonical_endpoint=seat_endpoint(endpoint))
        .exclude(status=AgentStatus.REMOVED)
        .order_by("-registered_at")
    )
    try:
        seats = list(players.values_list("player_id", "league__league_id", "league__status"))
    except DatabaseError:  # no such table: not run on a League Manager
        return None
    unfinished = IN_PROGRESS + (League.Status.INITIALIZING,)
    seats.sort(key=lambda seat: seat[2] not in unfinished)  # stable: the latest first within each
    if not seats:
        return None
    player_id, league_id, status = seats[0]
    return Registration(player_id, league_id, finished=status not in unfinished)


def announced_id(step: Step) -> str | None:
    """The id the agent calls itself in its reply to ``step``: ``player_id``, or ``sender``
    ``player:<id>`` (as the referee reads them, runner.reply_problem), when it is a league message."""
    reply = step.reply
    if not reply or step.not_agent:
        return None
    claimed = reply.get("player_id")
    if isinstance(claimed, str) and ID_FORM.match(claimed):
        return claimed
    kind, _, ident = str(reply.get("sender") or "").partition(":")
    return ident if kind == "player" and PLAYER_ID.match(ident) else None


ID_FORM = re.compile(r"^[A-Za-z0-9_-]{1,32}$")  # what the page's "Call it as" accepts
PLAYER_ID = re.compile(r"^P\d+$")


@dataclass
class Check:
    """One check of one endpoint (``run``); ``client``: an open HouseClient, or one is made.

    ``player_id``: the id to call the agent by; None: the one of its ``registration`` on this LM,
    else ``AGENT_ID`` until it announces another in its first reply (then that one, said once).
    """

    endpoint: str
    game_type: str = "even_odd"
    player_id: str | None = None
    timeouts: Timeouts = TIMEOUTS
    client: HouseClient | None = None
    lm_token: str = field(default_factory=lambda: secrets.token_hex(32))
    registration: Registration | None = None
    referee_endpoint: str = DEFAULT_REFEREE_ENDPOINT

    async def run(self) -> Report:
        started = time.monotonic()
        if self.player_id:
            player_id, source = self.player_id, "given"
        elif self.registration:
            player_id, source = self.registration.player_id, f"registered in {self.registration.league_id}"
        else:
            player_id, source = AGENT_ID, "default"
        report = Report(self.endpoint, self.game_type, player_id, id_source=source)
        own = self.client is None
        client = self.client or HouseClient(address_check=NetworksPolicy(allowed_networks()))
        try:
            await self._run(client, report)
        finally:
            if own:
                await client.close()
        fold_repeats(report.steps)
        report.seconds = round(time.monotonic() - started, 2)
        return report

    async def _notice(self, client: HouseClient, method: str, message_type: str, **fields: Any) -> Step:
        message = make_message(message_type, SENDER, auth_token=self.lm_token, league_id=LEAGUE_ID, **fields)
        step = Step(message_type, method, redact(message))
        try:
            result = await client.call(self.endpoint, method, message, timeout=self.timeouts.default, policy=NO_RETRY)
        except CallFailed as exc:
            step.latency_ms = round(exc.latency_ms, 1)
            _failed_call(step, exc.code.value, exc.detail)
        else:
            step.latency_ms = round(result.latency_ms, 1)
            judge_reply(step, result.reply, result.is_error, self.timeouts.default, from_league=True)
        if step.verdict == FAIL:  # a league carries on past a notice its agent cannot take
            step.verdict = WARN
        return step

    def _spec(self, a: str, b: str, match_id: str) -> MatchSpec:
        return MatchSpec(
            league_id=LEAGUE_ID,
            round_id=1,
            match_id=match_id,
            game_type=self.game_type,
            player_a=Seat(a, self.endpoint),
            player_b=Seat(b, HOUSE_ENDPOINT, HOUSE_NAME),
            match_token=secrets.token_hex(32),
            timeouts=self.timeouts,
            retry=NO_RETRY,
            max_invalid_moves=1,  # one invalid answer is forgiven (and a GAME_ERROR sent), as in a league
            standings={a: {"wins": 0, "losses": 0, "draws": 0}, b: {"wins": 0, "losses": 0, "draws": 0}},
        )

    async def _announce(self, client: HouseClient, a: str, b: str, match_id: str) -> Step:
        match = {
            "match_id": match_id,
            "game_type": self.game_type,
            "player_A_id": a,
            "player_B_id": b,
            "referee_endpoint": self.referee_endpoint,
        }
        return await self._notice(client, "notify_round", "ROUND_ANNOUNCEMENT", round_id=1, matches=[match])

    async def _play(self, client: HouseClient, a: str, b: str, match_id: str) -> tuple[Any, list[Step]]:
        runner = MatchRunner(self._spec(a, b, match_id), get_game(self.game_type), client, "referee:REF01")
        result = await runner.run()
        return result, match_steps(runner.log.entries, a, self.game_type, self.timeouts)

    async def _run(self, client: HouseClient, report: Report) -> None:
        a = report.player_id
        adoptable = report.id_source == "default"

        def seats(a: str) -> tuple[str, str]:  # the house bot is P02, or P01 when the agent is P02
            return a, HOUSE_ID if a != HOUSE_ID else AGENT_ID

        first = await self._announce(client, *seats(a), "R1M1")
        if first.error_code in ("E001", "E009"):  # unreachable, or silent: the rest would go the same way
            first.verdict = FAIL
            report.steps.append(first)
            report.stopped = "the agent did not answer the first message: nothing else was sent"
            return
        if first.not_agent:  # some other service: no practice match is played against it
            _not_an_agent(first, strict=True)
            report.steps.append(first)
            report.stopped = "the endpoint did not answer as a league agent: nothing else was sent"
            return
        claimed = announced_id(first) if adoptable else None
        if claimed and claimed != a:  # announced at once: announce the match again under that id
            a = self._adopt(report, claimed)
            first = await self._announce(client, *seats(a), "R1M1")
        match_id = "R1M1"
        result, steps = await self._play(client, *seats(a), match_id)
        claimed = announced_id(steps[0]) if adoptable and not report.id_warning and steps else None
        if claimed and claimed != a:  # announced in its answer to the invitation: play again so
            a = self._adopt(report, claimed)  # that what else is wrong shows, in a match of its own
            match_id = "R1M2"  # a new match: an agent binds a match to its first invitation's token
            first = await self._announce(client, *seats(a), match_id)
            result, steps = await self._play(client, *seats(a), match_id)
        report.steps += [first, *steps]
        report.match_result = result.to_dict()
        a, b = seats(a)

        points = result.score
        lost = result.technical_loss
        row = ResultRow(match_id, a, b, points[a], points[b], a in lost, b in lost)
        names = {a: "Your agent", b: HOUSE_NAME}
        table = [standing_dict(r, names[r.player_id]) for r in compute_standings([a, b], [row])]
        report.steps.append(
            await self._notice(client, "update_standings", "LEAGUE_STANDINGS_UPDATE", round_id=1, standings=table)
        )
        report.steps.append(
            await self._notice(
                client,
                "notify_round_completed",
                "ROUND_COMPLETED",
                round_id=1,
                matches_played=1,
                matches_completed=1,
                next_round_id=None,
            )
        )
        if self.registration and not self.registration.finished:
            report.skipped.append(
                f"LEAGUE_COMPLETED skipped: your agent is registered in league {self.registration.league_id}, "
                "which is not finished (a practice LEAGUE_COMPLETED must not end your seat there)"
            )
            return
        top = table[0]
        champion = {"player_id": top["player_id"], "display_name": top["display_name"], "points": top["points"]}
        report.steps.append(
            await self._notice(
                client,
                "notify_league_completed",
                "LEAGUE_COMPLETED",
                total_rounds=1,
                total_matches=1,
                champion=champion,
                final_standings=table,
            )
        )

    @staticmethod
    def _adopt(report: Report, claimed: str) -> str:
        report.id_warning = (
            f"Your agent answered as {claimed}, not {report.player_id}: the check called it {claimed} from "
            f"then on. In a league, answer as the player_id the league gave you at registration."
        )
        report.player_id, report.id_source = claimed, "announced"
        return claimed


def fold_repeats(steps: list[Step]) -> None:
    """Say each warning once: a warning whose fix an earlier step already gave is marked
    ``same_as`` that step (its fix not repeated), which counts it in ``also``."""
    first: dict[tuple[str | None, str | None], int] = {}
    for n, step in enumerate(steps, 1):
        if step.verdict != WARN:
            continue
        key = (step.fix, step.see)
        if key in first:
            step.same_as = first[key]
            steps[first[key] - 1].also += 1
        else:
            first[key] = n


def reply_summary(step: Step) -> str:
    """The reply in a few words: its type and the field that matters."""
    reply = step.reply
    if step.not_agent:
        return "not a league message"
    if step.rpc_code is not None:
        return f"JSON-RPC error {step.rpc_code}"
    if step.note.startswith("your agent has no tool"):
        return "no such tool"
    if reply is None:
        return "no reply"
    parts = [str(reply.get("message_type") or "(no message_type)")]
    for key in ("error_code", "status", "accept", "parity_choice", "move"):
        if key in reply:
            parts.append(f"{key}={reply[key]!r}" if not isinstance(reply[key], dict) else f"{key}={reply[key]}")
    return " ".join(parts)


# -- what callers apply first ------------------------------------------------------------------
def allowed_networks() -> str:
    """The networks the check may call (``CHECKAGENT_ALLOWED_NETWORKS``, else a league's default)."""
    from league.models import DEFAULT_ALLOWED_NETWORKS

    return settings.CHECKAGENT_ALLOWED_NETWORKS or DEFAULT_ALLOWED_NETWORKS


def endpoint_refusal(endpoint: str) -> str | None:
    """Why the check will not call ``endpoint`` (the leagues' endpoint policy), or None. The
    check's client applies the same policy again to each address it connects to."""
    from league.endpoints import endpoint_problem

    return endpoint_problem(endpoint, allowed_networks())


async def take_check_slot(client_host: str | None) -> int | None:
    """Count one check against ``client_host``'s allowance (``CHECKAGENT_PER_MINUTE``, in the rate
    limiter's store); None when it may run, else the seconds to wait before the next one."""
    per_minute = settings.CHECKAGENT_PER_MINUTE
    if per_minute <= 0:
        return None
    bucket = Bucket(f"{settings.MCP_RATE_LIMIT_PREFIX}check:{client_host or '-'}", per_minute, "address")
    empty = await limiter.take([bucket])
    return None if empty is None else max(1, round(60 / per_minute))


async def run_check(endpoint: str, **options: Any) -> Report:
    """Check the agent at ``endpoint`` (see :class:`Check` for the options)."""
    return await Check(endpoint, **options).run()
