"""Registration of players and referees (docs/protocol.md, "Registering", "Who an agent is",
"Registering again"). An agent is its endpoint's seat (``seat_endpoint``, stored once and found by
index) plus the token we issued: a new agent gets an id (the one its sender asks for, when free)
and a token; the agent of a seat registering again gets its identity back with a new token once it
shows its token (or the one before it) or comes from the endpoint's machine; anyone else is told
whose seat it is and what to do. Registrations of one league are serialised by locking the
league's row, so ids and the capacity check stay exact. Referees also need the operator's key."""

from __future__ import annotations

import hmac
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Length
from django.utils import timezone

from league import queries
from league.auth import find_by_token, lm_token, new_token
from league.endpoints import endpoint_holder, endpoint_problem, network_of, same_host
from league.events import EventValues, append_events, broadcast, event_values, record_event
from league.models import AgentStatus, League, Player, Referee, hash_token
from league.relayaddress import CONNECT, is_relay_endpoint, relay_endpoint
from league.seats import seat_endpoint
from leagueproto.envelope import check_agent_protocol_version
from leagueproto.errors import MISSING, ErrorCode, LeagueError, refusal, see

log = logging.getLogger(__name__)

REGISTRATION_CLOSED = "Registration closed"
LEAGUE_FULL = "League full"
GAME_TYPE_NOT_SUPPORTED = "Game type not supported"
ENDPOINT_TAKEN = "Endpoint already registered"
NO_RELAY_ADDRESS = "The League Manager does not know its own address for relay endpoints (LM_BASE_URL)"


SEE_REFEREE_KEY = see("registering")
HOW_TO_SET_THE_KEY = (
    "set REFEREE_KEY in the League Manager's environment (site-wide) or generate the league's key in "
    "the admin (Leagues > Generate a referee key), then start referees with --key or REFEREE_KEY "
    '(docs/operations.md, "Referee keys")'
)
_key_advice_logged = False  # the LM logs how to set the key once per process, not per refusal


def generate_referee_key(league: League) -> str:
    """A new referee key for ``league`` (admin): returned once, stored only as its hash. It
    replaces the league's previous key, which stops working with this commit (rotation)."""
    key, key_hash = new_token()
    with transaction.atomic():
        League.objects.filter(pk=league.pk).update(referee_key_hash=key_hash)
        rotated = bool(league.referee_key_hash)
        record_event(league, "STATE", "referee_key_generated", payload={"replaced_previous": rotated})
    league.referee_key_hash = key_hash
    return key


def revoke_referee_key(league: League) -> None:
    """Drop the league's referee key (admin): registrations with it are refused from now on.
    Referees already registered keep their tokens (revoke those one by one if need be)."""
    with transaction.atomic():
        if not League.objects.filter(pk=league.pk).exclude(referee_key_hash="").update(referee_key_hash=""):
            raise ValueError(f"league {league.league_id} has no referee key")
        record_event(league, "STATE", "referee_key_revoked", payload={})
    league.referee_key_hash = ""


def check_referee_key(league: League, key: Any) -> None:
    """E012 unless ``key`` is the site's REFEREE_KEY or ``league``'s own key. Referees decide
    results, so they are the operator's: with neither key configured every referee is refused."""
    global _key_advice_logged
    site_key: str = settings.REFEREE_KEY
    if isinstance(key, str) and key:
        # Compared as hashes: constant time, and any text (compare_digest refuses non-ASCII str).
        digest = hash_token(key)
        if site_key and hmac.compare_digest(digest, hash_token(site_key)):
            return
        if league.referee_key_hash and hmac.compare_digest(digest, league.referee_key_hash):
            return
    configured = bool(site_key or league.referee_key_hash)
    if not _key_advice_logged:
        _key_advice_logged = True
        log.warning("register_referee refused: no valid referee key; to let referees in, %s", HOW_TO_SET_THE_KEY)
    raise refusal(
        ErrorCode.AUTH_TOKEN_INVALID,
        "referee_key",
        "the referee key the league's operator gave you (runreferee --key or REFEREE_KEY)",
        MISSING if key is None else "a key that is not valid here",  # never echoed: it may be a near miss
        SEE_REFEREE_KEY,
        problem=(
            f"register_referee needs a valid referee key for league {league.league_id}"
            if configured
            else f"league {league.league_id} accepts no referee yet: its operator has set no referee key"
        ),
    )


@dataclass
class Registration:
    """The outcome of a registration request, ready to be put in the response message."""

    league_id: str | None
    status: str  # ACCEPTED / REJECTED
    reason: str | None = None
    agent_id: str | None = None
    auth_token: str | None = None
    league_manager_token: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    league_pk: int | None = None  # the league's key, so the caller can log the call without a query
    # The Event rows of the registration (its ``player_registered`` …), appended already unless
    # the caller asked for them (``record_events=False``) to insert them with its own.
    events: list[EventValues] = field(default_factory=list)


def registration_league(league_id: str | None, *, for_referee: bool = False, seat: str = "") -> League:
    """The league a registration goes to: the named one, or the one league open for registration,
    or (none open) the one in progress where ``seat`` is held: an agent registering again after
    its league closed registration, naming no league as the course's message does."""
    if league_id:
        return queries.get_league(league_id)
    now = timezone.now()
    candidates = [x for x in League.objects.filter(status=League.Status.REGISTERING) if x.registration_open(now)]
    if not candidates and seat:
        model = Referee if for_referee else Player
        held = model.objects.filter(canonical_endpoint=seat).exclude(status=AgentStatus.REMOVED)
        candidates = list(League.objects.in_progress().filter(pk__in=held.values("league_id")))
    if not candidates and for_referee:
        # Referees may join a league that is already under way, to add capacity.
        candidates = list(
            League.objects.filter(status__in=(League.Status.READY, League.Status.RUNNING, League.Status.PAUSED))
        )
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise LeagueError(
            ErrorCode.LEAGUE_NOT_FOUND,
            "no league is open for registration; ask the organiser or name a league with league_id",
        )
    names = sorted(x.league_id for x in candidates)
    raise LeagueError(
        ErrorCode.LEAGUE_NOT_FOUND,
        f"{len(names)} leagues are open for registration ({', '.join(names)}): name one with league_id",
        context={"leagues": names},
    )


def _other_model(model: type[Player] | type[Referee]) -> type[Player] | type[Referee]:
    return Referee if model is Player else Player


def _direct_endpoint_problem(endpoint: str, allowed_networks: str) -> str | None:
    """``endpoint_problem``, and a relay endpoint is not an agent's own: the LM assigns those."""
    if is_relay_endpoint(endpoint):
        return "Endpoint is a relay endpoint of this League Manager: register with contact_endpoint 'connect'"
    return endpoint_problem(endpoint, allowed_networks)


def _agents_summary(model: type[Player] | type[Referee], league_pk: int) -> tuple[int, str | None]:
    """``(agents not removed, highest id)`` of a league's agents of a kind. The highest id is the
    longest, then the greatest: ids are a prefix and a number."""
    agents = model.objects.filter(league_id=league_pk)
    count = agents.exclude(status=AgentStatus.REMOVED).count()
    id_field = "player_id" if model is Player else "referee_id"
    top = agents.order_by(Length(id_field).desc(), F(id_field).desc()).values_list(id_field, flat=True).first()
    return count, top


def _relay_name_taken(league: League, display_name: str | None) -> bool:
    """Whether a relay player of ``league`` that is not removed goes by ``display_name``.

    A player that connects out has no endpoint of its own: the LM assigns one per registration,
    so its name is what tells a second registration of the same player (its reply lost, say) from
    a new player, as the endpoint does for a player with its own. Like that one, it is refused
    rather than given a second row."""
    if not display_name:
        return False
    relay_players = Player.objects.filter(league=league, connection=Player.Connection.RELAY)
    return relay_players.filter(display_name=display_name).exclude(status=AgentStatus.REMOVED).exists()


# An id an agent may ask for in its registration's sender (``player:P07``): the league's own form.
REQUESTABLE_ID = {"player": re.compile(r"^P\d{2,3}$"), "referee": re.compile(r"^REF\d{2,3}$")}


def _new_id(model: type[Player] | type[Referee], league: League, kind: str, top: str | None, asked: str | None) -> str:
    """The id of a new agent: the one its sender asks for (``player:P07``) when it is in the
    league's form and free (never given before in this league); else the one after the highest."""
    prefix = "P" if kind == "player" else "REF"
    field_name = "player_id" if model is Player else "referee_id"
    free = asked and REQUESTABLE_ID[kind].match(asked)
    if free and not model.objects.filter(league=league, **{field_name: asked}).exists():
        return asked
    return _next_id(model, league, prefix, top)


def _next_id(model: type[Player] | type[Referee], league: League, prefix: str, top: str | None) -> str:
    """The id after ``top`` (the league's highest, see ``_agents_summary``)."""
    field_name = "player_id" if model is Player else "referee_id"
    if top is not None:
        digits = top[len(prefix) :]
        if top.startswith(prefix) and digits.isdigit():
            return f"{prefix}{int(digits) + 1:02d}"
    highest = 0  # an id made by hand is the longest: look at them all
    for value in model.objects.filter(league=league).values_list(field_name, flat=True):
        digits = value[len(prefix) :]
        if digits.isdigit():
            highest = max(highest, int(digits))
    return f"{prefix}{highest + 1:02d}"


ENDPOINT_OF_OTHER_KIND = "Endpoint is used by a {kind} of this league"
RELAY_NAME_TAKEN = "A relay player of this display name is already registered: register again with its auth_token"
SEE_REGISTERING = see("registering")


def _token_owner(token: str, kind: str, league: League, sender_id: str | None) -> Player | Referee:
    """The agent of ``league`` a registration's token belongs to (its token, or the one before its
    latest rotation: the reply that carried the new one may be lost). E012, and nothing changes, when
    it is another kind's token, no live token of this league (unknown, rotated away, revoked,
    another league's, a removed agent's: register without auth_token to join afresh), or the
    sender names another registered agent of the league."""
    model = Player if kind == "player" else Referee
    other_kind = "referee" if kind == "player" else "player"
    same = find_by_token(token, kind) or find_by_token(token, kind, previous=True)
    if same is None and find_by_token(token, other_kind) is not None:
        raise LeagueError(
            ErrorCode.AUTH_TOKEN_INVALID,
            f"that auth_token belongs to a {other_kind}; a {other_kind} cannot register as a {kind}",
        )
    if same is None or same.league_id != league.pk or same.status == AgentStatus.REMOVED:
        raise refusal(
            ErrorCode.AUTH_TOKEN_INVALID,
            "auth_token",
            f"the auth_token of your latest registration reply in league {league.league_id}, "
            "or no auth_token at all to register as a new agent",
            "a token this league does not accept",
            SEE_REGISTERING,
            problem="the auth_token is unknown, replaced by a newer registration, revoked or another league's",
        )
    own_id = same.player_id if kind == "player" else same.referee_id
    id_field = "player_id" if kind == "player" else "referee_id"
    if (
        sender_id
        and sender_id != own_id
        and model.objects.filter(league_id=league.pk, **{id_field: sender_id}).exists()
    ):
        raise refusal(
            ErrorCode.AUTH_TOKEN_INVALID,
            "sender",
            f"'{kind}:{own_id}' (the agent this token belongs to) or your own name",
            f"{kind}:{sender_id}",
            SEE_REGISTERING,
            problem=f"the sender names another registered {kind}; this token is {own_id}'s",
        )
    return same


def _register(
    *,
    kind: str,
    league_id: str | None,
    meta: dict[str, Any],
    presented_token: str | None,
    sender_id: str | None = None,
    referee_key: Any = None,
    relay_base: str | None = None,
    client_host: str | None = None,
    record_events: bool = True,
) -> Registration:
    model: type[Player] | type[Referee] = Player if kind == "player" else Referee
    endpoint = meta["contact_endpoint"]
    # A player that cannot be reached connects out: the LM assigns it an endpoint on its relay
    # (league/relay/), which the endpoint policy does not judge: the LM made it.
    relay = kind == "player" and endpoint == CONNECT
    # Resolved before the league's row is locked: a slow name server holds up no one else.
    seat = "" if relay else seat_endpoint(endpoint)
    with transaction.atomic():
        # Serialise registrations per league (its row locked): ids and the capacity check stay exact.
        named = League.objects.select_for_update().filter(league_id=league_id).order_by().first() if league_id else None
        if named is None:  # none named (or no such league: registration_league says so)
            league = registration_league(league_id, for_referee=kind == "referee", seat=seat)
            named = League.objects.select_for_update().get(pk=league.pk)
        league = named
        if kind == "referee":
            check_referee_key(league, referee_key)

        def rejected(reason: str, agent_id: str | None = None) -> Registration:
            return Registration(league.league_id, "REJECTED", reason, agent_id, league_pk=league.pk)

        # A known agent re-registering with its token (or the one before its latest rotation,
        # whose reply it may have lost): its endpoint updated, its token rotated. Checked as a
        # new registration is: the game types, the endpoint's policy, and no other agent of the
        # league at that endpoint.
        if presented_token:
            same = _token_owner(presented_token, kind, league, sender_id)
            game_types = meta.get("game_types")
            if game_types is not None and league.game_type not in game_types:
                return rejected(GAME_TYPE_NOT_SUPPORTED)
            if relay:
                if not relay_base:
                    return rejected(NO_RELAY_ADDRESS)
                endpoint = relay_endpoint(relay_base, league.league_id, same.player_id)
                seat = seat_endpoint(endpoint)
            problem = None if relay else _direct_endpoint_problem(endpoint, league.allowed_networks)
            if problem:
                return rejected(problem)
            holder = endpoint_holder(model, league.pk, seat)
            if holder is not None and holder.pk != same.pk:
                return rejected(ENDPOINT_TAKEN)
            if endpoint_holder(_other_model(model), league.pk, seat) is not None:
                return rejected(ENDPOINT_OF_OTHER_KIND.format(kind="referee" if kind == "player" else "player"))
            held = hash_token(presented_token)
            return _reissue(league, kind, same, meta, endpoint, seat, relay=relay, held=held, record=record_events)

        # The same agent again without a token (its reply lost, a restart): the endpoint's agent,
        # in any league state, once the request shows it comes from the endpoint's own machine.
        if not relay:
            holder = endpoint_holder(model, league.pk, seat)
            if holder is not None:
                holder_id = holder.player_id if kind == "player" else holder.referee_id
                if not same_host(client_host, seat):
                    return rejected(ENDPOINT_TAKEN_ADVICE.format(kind=kind, agent_id=holder_id), holder_id)
                problem = _direct_endpoint_problem(endpoint, league.allowed_networks)
                if problem:  # the spelling it gives now is the one it will be called at
                    return rejected(problem)
                return _reissue(
                    league, kind, holder, meta, endpoint, seat, relay=False, held=None, record=record_events
                )

        if kind == "player":
            if not league.registration_open():
                return rejected(REGISTRATION_CLOSED)
        elif league.status not in (*queries.ACTIVE_STATUSES, League.Status.INITIALIZING):
            return rejected(REGISTRATION_CLOSED)
        if meta.get("game_types") is None:  # left out: the agent plays the league's game
            meta = {**meta, "game_types": [league.game_type]}
        if league.game_type not in meta["game_types"]:
            return rejected(GAME_TYPE_NOT_SUPPORTED)
        count, top = _agents_summary(model, league.pk)
        limit = league.max_players if kind == "player" else league.max_referees
        if count >= limit:
            return rejected(LEAGUE_FULL)
        if relay and not relay_base:
            return rejected(NO_RELAY_ADDRESS)
        problem = None if relay else _direct_endpoint_problem(endpoint, league.allowed_networks)
        if problem:
            return rejected(problem)
        if not relay and endpoint_holder(_other_model(model), league.pk, seat) is not None:
            return rejected(ENDPOINT_OF_OTHER_KIND.format(kind="referee" if kind == "player" else "player"))
        if relay and _relay_name_taken(league, meta.get("display_name")):
            return rejected(RELAY_NAME_TAKEN)
        network = network_of(client_host)
        if league.max_seats_per_network and network and _seats_of(league, network) >= league.max_seats_per_network:
            return rejected(NETWORK_FULL.format(limit=league.max_seats_per_network, network=network))

        agent_id = _new_id(model, league, kind, top, sender_id)
        if relay:
            endpoint = relay_endpoint(relay_base, league.league_id, agent_id)
            seat = seat_endpoint(endpoint)
        token, token_hash = new_token()
        now = timezone.now()
        fields: dict[str, Any] = {
            "league": league,
            "display_name": meta.get("display_name") or agent_id,
            "version": meta.get("version") or "",
            "endpoint": endpoint,
            "canonical_endpoint": seat,
            "registered_from": network,
            "game_types": list(meta.get("game_types") or []),
            "token_hash": token_hash,
            "registered_at": now,
            "last_seen_at": now,
            "self_named": _self_named(kind, sender_id, agent_id),
        }
        if kind == "player":
            fields["player_id"] = agent_id
            fields["protocol_version"] = meta.get("protocol_version") or UNKNOWN_PROTOCOL_VERSION
            fields["connection"] = Player.Connection.RELAY if relay else Player.Connection.DIRECT
        else:
            fields["referee_id"] = agent_id
            fields["max_concurrent_matches"] = meta.get("max_concurrent_matches") or 2
        model.objects.create(**fields)
        payload: dict[str, Any] = {"display_name": fields["display_name"], "endpoint": endpoint}
        if fields["self_named"]:
            payload["asked_for"] = fields["self_named"]
        row = event_values(league, "STATE", f"{kind}_registered", agent=agent_id, payload=payload)
        if record_events:
            append_events([row])
        broadcast(
            league.league_id,
            f"{kind}_registered",
            {f"{kind}_id": agent_id, "display_name": fields["display_name"], "endpoint": endpoint},
        )
        return Registration(
            league.league_id,
            "ACCEPTED",
            None,
            agent_id,
            token,
            lm_token(league.league_id, agent_id, token_hash),
            league_pk=league.pk,
            events=[row],
        )


ENDPOINT_TAKEN_ADVICE = (
    ENDPOINT_TAKEN + ": it is {kind} {agent_id}'s. If that is your agent, register again with its auth_token, "
    "or send this registration from the machine the endpoint is on; else give your own endpoint "
    "(docs/protocol.md#registering-again)"
)
NETWORK_FULL = "Too many seats from your network: this league takes at most {limit} agents from {network}"


def _seats_of(league: League, network: str) -> int:
    """The league's agents (players and referees, not removed) registered from ``network``."""
    return sum(
        model.objects.filter(league=league, registered_from=network).exclude(status=AgentStatus.REMOVED).count()
        for model in (Player, Referee)
    )


def _self_named(kind: str, sender_id: str | None, agent_id: str) -> str:
    """The id an agent's sender gives itself when it is an id (``P02``) other than the one it
    got: what it will likely write in its replies (shown on its page; never trusted)."""
    if sender_id and REQUESTABLE_ID[kind].match(sender_id) and sender_id != agent_id:
        return sender_id
    return ""


def _reissue(
    league: League,
    kind: str,
    same: Player | Referee,
    meta: dict[str, Any],
    endpoint: str,
    seat: str,
    *,
    relay: bool,
    held: str | None,
    record: bool = True,
) -> Registration:
    """A registered agent back: its endpoint and details updated, a new token issued, and back
    in play if the conductor had marked it unreachable. ``held``: the hash of the token it
    presented (None: it proved itself by its address)."""
    agent_id = same.player_id if isinstance(same, Player) else same.referee_id
    moved = same.canonical_endpoint != seat  # a new address has not answered the LM's ping yet
    same.endpoint = endpoint
    same.canonical_endpoint = seat
    if isinstance(same, Player):
        same.connection = Player.Connection.RELAY if relay else Player.Connection.DIRECT
    same.display_name = meta.get("display_name") or same.display_name
    same.version = meta.get("version") or same.version
    same.game_types = meta.get("game_types") or same.game_types
    same.last_seen_at = timezone.now()
    # The token the agent holds (the one it presented; without one, the last issued) stays good
    # for registering again until the new one is used: this reply may be lost too.
    same.previous_token_hash = held or same.token_hash
    token, same.token_hash = new_token()
    fields = [
        "endpoint",
        "canonical_endpoint",
        "display_name",
        "version",
        "game_types",
        "last_seen_at",
        "token_hash",
        "previous_token_hash",
    ]
    if same.unreachable_since is not None:
        # Marked unreachable by the conductor (league/conductor/), and here it is again:
        # back in play at once (a referee the conductor suspended is ACTIVE again; one an
        # admin suspended has no such mark and stays suspended).
        same.unreachable_since, same.unreachable_reason, same.failures = None, "", 0
        fields += ["unreachable_since", "unreachable_reason", "failures"]
        if same.status == AgentStatus.SUSPENDED:
            same.status = AgentStatus.ACTIVE
            fields.append("status")
    if isinstance(same, Player):
        fields.append("connection")
    if moved:
        same.answered_at = None
        fields.append("answered_at")
    same.save(update_fields=fields)
    row = event_values(
        league,
        "STATE",
        f"{kind}_endpoint_updated" if held else f"{kind}_registered_again",
        agent=agent_id,
        payload={"endpoint": endpoint, "token_rotated": True, "proof": "token" if held else "same machine"},
    )
    if record:
        append_events([row])
    return Registration(
        league.league_id,
        "ACCEPTED",
        None,
        agent_id,
        token,
        lm_token(league.league_id, agent_id, same.token_hash),
        league_pk=league.pk,
        events=[row],
    )


# What a player that declared no protocol_version is recorded with (the course's registration has none).
UNKNOWN_PROTOCOL_VERSION = "unknown"


def register_player(
    league_id: str | None,
    player_meta: dict[str, Any],
    presented_token: str | None,
    relay_base: str | None = None,
    sender_id: str | None = None,
    client_host: str | None = None,
    *,
    record_events: bool = True,
) -> Registration:
    """E018 when protocol_version is given and below 2.0.0 (absent is fine: recorded as unknown);
    E012 for a token that is not this league's live player token, or one sent under another
    player's id; REJECTED when closed, full, game type or endpoint refused (docs/protocol.md,
    "Registering"). ``relay_base``: the LM's address for the endpoint of a player registering
    with "connect". ``sender_id``: what the sender calls itself (an id asked for, ``P07``);
    ``client_host``: the address the request came from (the proof of a registration again
    without a token, and the network whose seats are counted). ``record_events=False``: the caller
    appends ``Registration.events`` itself, in the same transaction (the ``/mcp`` tool inserts them
    with the call's own Event rows, in one insert)."""
    check_agent_protocol_version(player_meta.get("protocol_version"))
    return _register(
        kind="player",
        league_id=league_id,
        meta=player_meta,
        presented_token=presented_token,
        relay_base=relay_base,
        sender_id=sender_id,
        client_host=client_host,
        record_events=record_events,
    )


def register_referee(
    league_id: str | None,
    referee_meta: dict[str, Any],
    presented_token: str | None,
    *,
    referee_key: Any,
    sender_id: str | None = None,
    client_host: str | None = None,
    record_events: bool = True,
) -> Registration:
    """As ``register_player``, and first of all E012 without a valid ``referee_key``
    (``check_referee_key``)."""
    if referee_meta.get("protocol_version") is not None:
        check_agent_protocol_version(referee_meta["protocol_version"])
    return _register(
        kind="referee",
        league_id=league_id,
        meta=referee_meta,
        presented_token=presented_token,
        sender_id=sender_id,
        referee_key=referee_key,
        client_host=client_host,
        record_events=record_events,
    )
