"""A registry of tools and resources: what an agent offers, independent of transport."""

from __future__ import annotations

import hmac
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic.json_schema import models_json_schema

from leagueproto.envelope import game_error_message, league_error_message, make_message, validate_envelope
from leagueproto.errors import (
    MISSING,
    SEE_WIRE,
    ErrorCode,
    LeagueError,
    refusal,
)
from leagueproto.messages import FROM_JSON, Empty, ErrorReply, LeagueReply, Pong

log = logging.getLogger(__name__)

Handler = Callable[[Any, "CallContext"], Awaitable[dict[str, Any]]]
Authenticator = Callable[["Tool", dict[str, Any], "CallContext"], Awaitable[Any]]
ResourceReader = Callable[[str, dict[str, str]], Awaitable[Any]]


@dataclass
class CallContext:
    """What a handler may know about the call besides its arguments."""

    method: str
    dialect: str  # "direct" (method = tool name) or "mcp" (tools/call)
    headers: Mapping[str, str] = field(default_factory=dict)  # lower-case names
    client_host: str | None = None
    local_port: int | None = None
    request_id: Any = None
    identity: Any = None  # whatever the authenticator returned
    body: bytes | None = None  # the raw request body, when the call came over HTTP
    # Whether ``body`` holds the JSON escape of a NUL character (``\u0000``), read once per request
    # (a batch's items share it): without it no string of the request holds one.
    body_has_nul: bool = True

    @property
    def from_json(self) -> bool:
        """Whether the arguments were parsed from a request's JSON (the call came over HTTP)."""
        return self.body is not None

    @property
    def bearer_token(self) -> str | None:
        value = self.headers.get("authorization", "")
        scheme, _, token = value.partition(" ")
        return token.strip() or None if scheme.lower() == "bearer" else None


def same_token(presented: Any, expected: str) -> bool:
    """Whether ``presented`` is the token ``expected``, in constant time.

    Compared as UTF-8 bytes: ``hmac.compare_digest`` raises TypeError on non-ASCII text, and a
    token is whatever a caller sent (a number, "é"), so anything but a string is simply not it."""
    if not isinstance(presented, str):
        return False
    return hmac.compare_digest(presented.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True)
class Tool:
    name: str
    handler: Handler
    model: type[BaseModel]
    description: str = ""
    aliases: tuple[str, ...] = ()
    message_types: tuple[str, ...] = ()
    envelope: bool = True  # arguments are a league message whose envelope is validated
    auth: str | None = None  # role the authenticator must confirm, e.g. "player", "referee"
    output: type[BaseModel] = LeagueReply  # the reply on success (a refusal is an ErrorReply)
    see: str = SEE_WIRE  # the section of docs/protocol.md that documents the tool

    def input_schema(self) -> dict[str, Any]:
        schema = self.model.model_json_schema()
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        return schema

    def output_schema(self) -> dict[str, Any]:
        """The tool's reply, or the error reply that refuses the call: ``structuredContent`` is
        one of the two whether ``isError`` is false or true, so it always matches the schema."""
        return _output_schema(self.output)


@dataclass(frozen=True)
class Resource:
    uri: str  # a URI, or a template such as "game://state/{match_id}"
    name: str
    reader: ResourceReader
    description: str = ""
    mime_type: str = "application/json"

    @property
    def is_template(self) -> bool:
        return "{" in self.uri

    def match(self, uri: str) -> dict[str, str] | None:
        if not self.is_template:
            return {} if uri == self.uri else None
        pattern = re.escape(self.uri)
        pattern = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", pattern)
        found = re.fullmatch(pattern, uri)
        return found.groupdict() if found else None


_output_schemas: dict[type[BaseModel], dict[str, Any]] = {}


def _output_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = _output_schemas.get(model)
    if schema is None:
        refs, top = models_json_schema(
            [(model, "serialization"), (ErrorReply, "serialization")], ref_template="#/$defs/{model}"
        )
        schema = {
            "type": "object",
            "anyOf": [refs[(model, "serialization")], refs[(ErrorReply, "serialization")]],
            "$defs": top["$defs"],
        }
        _output_schemas[model] = schema
    return schema


def _described(model: type[BaseModel], loc: tuple[Any, ...]) -> FieldInfo | None:
    """The declaration of the field at ``loc`` in ``model`` (nested models followed), if any."""
    info: FieldInfo | None = None
    current: Any = model
    for part in loc:
        fields = getattr(current, "model_fields", None)
        if not isinstance(fields, dict) or part not in fields:
            return None
        info = fields[part]
        current = info.annotation
    return info


def _expected(model: type[BaseModel], loc: tuple[Any, ...], error: dict[str, Any]) -> str:
    message = str(error["msg"])
    problem = message.removeprefix("Input should be ") if message.startswith("Input should be ") else message
    info = _described(model, loc)
    described = (info.description or "").rstrip(".") if info is not None else ""
    if error["type"] == "missing":
        return described or "a value (the field is required)"
    return f"{problem} ({described})" if described else problem


def _validation_error(exc: ValidationError, model: type[BaseModel], see: str) -> LeagueError:
    """Map pydantic's errors to the catalog (a missing field is E003, anything else E002), naming
    the first field at fault, what it should be, what came and where the docs say more."""
    errors = exc.errors(include_url=False)
    missing = [".".join(str(p) for p in e["loc"]) for e in errors if e["type"] == "missing"]
    first = next((e for e in errors if e["type"] == "missing"), None) if missing else errors[0]
    assert first is not None
    field = ".".join(str(p) for p in first["loc"])
    expected = _expected(model, tuple(first["loc"]), first)
    if missing:
        return refusal(
            ErrorCode.MISSING_REQUIRED_FIELD,
            field,
            expected,
            MISSING,
            see,
            problem=f"missing required field(s): {', '.join(missing)}",
            missing_fields=missing,
        )
    details = [{"field": ".".join(str(p) for p in e["loc"]), "problem": e["msg"]} for e in errors]
    summary = "; ".join(f"{d['field']}: {d['problem']}" for d in details)
    return refusal(
        ErrorCode.INVALID_MESSAGE_FORMAT,
        field,
        expected,
        first.get("input", MISSING),
        see,
        problem=f"invalid field(s): {summary}",
        errors=details,
    )


class Toolset:
    """The tools and resources of one agent, and how its errors are answered.

    ``sender`` is the agent's envelope sender (a callable, since a referee's id is known only
    after registration). ``error_message_type`` is LEAGUE_ERROR for the LM, GAME_ERROR for a
    referee or player.
    """

    def __init__(
        self,
        *,
        name: str,
        version: str = "1.0.0",
        sender: str | Callable[[], str],
        error_message_type: str = "LEAGUE_ERROR",
        authenticator: Authenticator | None = None,
        instructions: str | None = None,
    ) -> None:
        self.name = name
        self.version = version
        self._sender = sender
        self.error_message_type = error_message_type
        self.authenticator = authenticator
        self.instructions = instructions
        self.tools: dict[str, Tool] = {}
        self._routes: dict[str, Tool] = {}
        self.resources: list[Resource] = []
        # Every agent answers the league-level ping (the JSON-RPC method ``ping`` answers ``{}``,
        # as MCP requires; this tool is what ``tools/call`` with name ``ping`` reaches).
        self.add_tool(
            Tool(
                name="ping",
                handler=self._pong,
                model=Empty,
                description="Is this agent up? Answers PONG.",
                message_types=("PING",),
                envelope=False,
                output=Pong,
            )
        )

    async def _pong(self, msg: Any, ctx: CallContext) -> dict[str, Any]:
        return self.reply(msg.model_extra or {}, "PONG", status="ok")

    @property
    def sender(self) -> str:
        return self._sender() if callable(self._sender) else self._sender

    # -- registration -------------------------------------------------------------------
    def add_tool(self, tool: Tool) -> Tool:
        for key in (tool.name, *tool.aliases, *tool.message_types):
            if key in self._routes and self._routes[key] is not tool:
                raise ValueError(f"route {key!r} is already taken by {self._routes[key].name}")
            self._routes[key] = tool
        self.tools[tool.name] = tool
        return tool

    def tool(
        self,
        name: str,
        model: type[BaseModel] | None = None,
        *,
        description: str = "",
        aliases: tuple[str, ...] = (),
        message_types: tuple[str, ...] = (),
        envelope: bool = True,
        auth: str | None = None,
        output: type[BaseModel] = LeagueReply,
        see: str = SEE_WIRE,
    ) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self.add_tool(
                Tool(
                    name=name,
                    handler=handler,
                    model=model or Empty,
                    description=description or (handler.__doc__ or "").strip().split("\n")[0],
                    aliases=aliases,
                    message_types=message_types,
                    envelope=envelope,
                    auth=auth,
                    output=output,
                    see=see,
                )
            )
            return handler

        return register

    def resource(
        self, uri: str, *, name: str, description: str = "", mime_type: str = "application/json"
    ) -> Callable[[ResourceReader], ResourceReader]:
        def register(reader: ResourceReader) -> ResourceReader:
            self.resources.append(Resource(uri, name, reader, description, mime_type))
            return reader

        return register

    # -- lookup -------------------------------------------------------------------------
    def find_tool(self, method: str) -> Tool | None:
        return self._routes.get(method)

    def find_resource(self, uri: str) -> tuple[Resource, dict[str, str]] | None:
        for resource in self.resources:
            params = resource.match(uri)
            if params is not None:
                return resource, params
        return None

    def tools_list(self) -> list[dict[str, Any]]:
        return [
            {
                "name": t.name,
                "description": t.description,
                "inputSchema": t.input_schema(),
                "outputSchema": t.output_schema(),
            }
            for t in self.tools.values()
        ]

    # -- calling ------------------------------------------------------------------------
    async def admit(self, method: str, ctx: CallContext) -> None:
        """Called before every JSON-RPC request that is no tool call (MCP's methods, resources,
        an unknown method), each item of a batch on its own: raise ``JsonRpcError`` to refuse it.
        Tool calls pass through ``call``. Nothing is refused here; the LM counts them against its
        rate limits (league/mcp/toolset.py)."""

    async def call(self, tool: Tool, arguments: dict[str, Any], ctx: CallContext) -> tuple[dict[str, Any], bool]:
        """Run a tool; returns ``(reply, is_error)``. League errors become error replies.

        Unexpected exceptions propagate: the server answers them with JSON-RPC -32603.
        """
        try:
            message = self.checked(tool, arguments, from_json=ctx.from_json)
            if tool.auth and self.authenticator is not None:
                ctx.identity = await self.authenticator(tool, arguments, ctx)
            return await tool.handler(message, ctx), False
        except LeagueError as err:
            return self.error_reply(err, arguments, tool), True

    def checked(self, tool: Tool, arguments: dict[str, Any], *, from_json: bool = False) -> BaseModel:
        """The tool's message from ``arguments``: envelope and model checks (E003/E018/E021/E002).

        ``from_json``: the arguments were parsed from a request's JSON (the call came over HTTP),
        so some checks of what only Python objects can be are left out (``JsonObjects``)."""
        if tool.envelope:
            validate_envelope(arguments)
        try:
            return tool.model.model_validate(arguments, context=FROM_JSON if from_json else None)
        except ValidationError as exc:
            raise _validation_error(exc, tool.model, tool.see) from None

    def error_reply(
        self, err: LeagueError, arguments: Mapping[str, Any] | None = None, tool: Tool | None = None
    ) -> dict[str, Any]:
        """The LEAGUE_ERROR / GAME_ERROR answering ``err``; its context names the docs section to
        read (the tool's own, when the error did not name a more precise one)."""
        if "see" not in err.context:
            err.context["see"] = tool.see if tool is not None else SEE_WIRE
            err.description = f"{err.description} (see {err.context['see']})"
        args = arguments if isinstance(arguments, Mapping) else {}
        conversation_id = args.get("conversation_id") if isinstance(args.get("conversation_id"), str) else None
        if self.error_message_type == "GAME_ERROR":
            match_id = args.get("match_id") if isinstance(args.get("match_id"), str) else None
            return game_error_message(err, sender=self.sender, match_id=match_id, conversation_id=conversation_id)
        return league_error_message(err, sender=self.sender, conversation_id=conversation_id)

    def message(self, message_type: str, **fields: Any) -> dict[str, Any]:
        """A message from this agent (a new conversation unless ``conversation_id`` is given)."""
        return make_message(message_type, self.sender, **fields)

    def reply(self, request: Any, message_type: str, **fields: Any) -> dict[str, Any]:
        """A reply to ``request`` (a LeagueMessage or dict): same conversation_id."""
        conversation_id = getattr(request, "conversation_id", None)
        if conversation_id is None and isinstance(request, Mapping):
            conversation_id = request.get("conversation_id")
        return make_message(message_type, self.sender, conversation_id=conversation_id, **fields)
