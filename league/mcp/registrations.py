"""Registrations: ``register_player`` and ``register_referee`` calls that arrive together are
judged (``actions.register_all``) and logged as one batch, in one transaction (group commit, as
reports are: league/mcp/reports.py). Each call gets the answer it would get on its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from league import actions
from league.auth import presented_token
from league.events import EventValues, append_events
from league.mcp.database import GroupCommit, each_on_its_own_if_need_be
from league.mcp.exchange import exchange_rows
from league.mcp.messages import RegisterPlayerRequest, RegisterRefereeRequest
from league.mcp.toolset import toolset
from leagueproto.errors import ErrorCode, LeagueError, refusal, see
from leagueproto.messages import LeagueMessage
from leagueproto.tools import Tool

# The message type each registration tool takes (its own name, as some agents write it, too).
REGISTRATION_TYPES = {"register_player": "LEAGUE_REGISTER_REQUEST", "register_referee": "REFEREE_REGISTER_REQUEST"}


@dataclass(frozen=True)
class PendingRegistration:
    """A registration call that passed the model checks, waiting for its batch. ``relay_base``:
    the LM's address, for a player that registers with contact_endpoint "connect";
    ``client_host``: the address the request came from."""

    tool: Tool
    arguments: dict[str, Any]
    message: RegisterPlayerRequest | RegisterRefereeRequest
    bearer: str | None
    relay_base: str | None = None
    client_host: str | None = None


class RegistrationQueue(GroupCommit[PendingRegistration, dict[str, Any]]):
    """Group commit for registrations (``GroupCommit``, ``register_calls``)."""

    def __init__(self) -> None:
        super().__init__(register_calls)


def register_calls(calls: list[PendingRegistration]) -> list[dict[str, Any] | Exception]:
    """Run and log a batch of registration calls in one transaction: each call's reply. Should
    the batch fail as a whole (a database error), each call is run again on its own."""
    return each_on_its_own_if_need_be(_register_calls, calls)


def register_logged(
    tool: Tool,
    arguments: dict[str, Any],
    msg: RegisterPlayerRequest | RegisterRefereeRequest,
    bearer: str | None,
    relay_base: str | None = None,
    client_host: str | None = None,
) -> dict[str, Any]:
    """One registration call (``register_calls`` of one)."""
    (reply,) = register_calls([PendingRegistration(tool, arguments, msg, bearer, relay_base, client_host)])
    if isinstance(reply, Exception):
        raise reply
    return reply


def _register_calls(calls: list[PendingRegistration]) -> list[dict[str, Any]]:
    """The registrations and the IN/OUT Event rows of their calls, in one transaction, each
    accepted registration's own Event row before its call's. A refusal writes nothing of the
    registration: only its exchange is logged."""
    with transaction.atomic():
        requests: list[actions.RegistrationRequest | LeagueError] = []
        for call in calls:
            try:
                requests.append(
                    registration_request(call.tool.name, call.message, call.bearer, call.relay_base, call.client_host)
                )
            except LeagueError as err:
                requests.append(err)
        judged = iter(
            actions.register_all(
                [r for r in requests if isinstance(r, actions.RegistrationRequest)], record_events=False
            )
        )
        rows: list[EventValues] = []
        replies = []
        for call, request in zip(calls, requests, strict=True):
            outcome = next(judged) if isinstance(request, actions.RegistrationRequest) else request
            if isinstance(outcome, LeagueError):
                reply = toolset.error_reply(outcome, call.arguments, call.tool)
                rows.extend(exchange_rows(call.tool, call.arguments, reply, None))
            else:
                reply = _registration_reply(call.message, outcome)
                rows.extend(
                    [*outcome.events, *exchange_rows(call.tool, call.arguments, reply, None, outcome.league_pk)]
                )
            replies.append(reply)
        append_events(rows)
    return replies


def registration_request(
    tool_name: str,
    msg: RegisterPlayerRequest | RegisterRefereeRequest,
    bearer: str | None,
    relay_base: str | None = None,
    client_host: str | None = None,
) -> actions.RegistrationRequest:
    """The registration a call asks for (``PendingRegistration`` tells what each argument is).

    The message must be a registration (E002 otherwise: a CHOOSE_PARITY_CALL sent to
    register_player creates no player), and only a player registers as a player and only a
    referee as a referee (E012 otherwise): the sender's kind is the first thing it claims.
    """
    wanted = "player" if tool_name == "register_player" else "referee"
    expected = REGISTRATION_TYPES[tool_name]
    if msg.message_type.strip().upper() not in (expected, tool_name.upper()):
        raise refusal(
            ErrorCode.INVALID_MESSAGE_FORMAT,
            "message_type",
            f"'{expected}' ({tool_name} registers a {wanted})",
            msg.message_type,
            see("registering"),
        )
    token = presented_token(msg.model_dump(), bearer)
    kind, _, sender_id = msg.sender.partition(":")
    if kind != wanted:
        raise refusal(
            ErrorCode.AUTH_TOKEN_INVALID,
            "sender",
            f"'{wanted}:<name>': only a {wanted} can register as a {wanted}",
            msg.sender,
            see("registering"),
        )
    if isinstance(msg, RegisterPlayerRequest):
        meta = msg.player_meta.model_dump()
        return actions.RegistrationRequest(
            "player", msg.league_id, meta, token, sender_id, relay_base=relay_base, client_host=client_host
        )
    meta = msg.referee_meta.model_dump()
    return actions.RegistrationRequest(
        "referee", msg.league_id, meta, token, sender_id, msg.referee_key, client_host=client_host
    )


def _registration_reply(msg: LeagueMessage, reg: actions.Registration) -> dict[str, Any]:
    message_type, id_field = (
        ("LEAGUE_REGISTER_RESPONSE", "player_id")
        if isinstance(msg, RegisterPlayerRequest)
        else ("REFEREE_REGISTER_RESPONSE", "referee_id")
    )
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
