"""Registration of players and referees (docs/protocol.md, "Registering", "Who an agent is",
"Registering again"). An agent is its endpoint's seat (``seat_endpoint``, stored once and found by
index) plus the token we issued: a new agent gets an id (the one its sender asks for, when free)
and a token; the agent of a seat registering again gets its identity back with a new token once it
shows its token (or the one before it) or comes from the endpoint's machine; anyone else is told
whose seat it is and what to do. Registrations of one league are serialised by locking the
league's row, so ids and the capacity check stay exact; those that arrive together run as one
batch (``register_all``: one lock, one read of their seats, one insert), each answered as it
would be on its own. Referees also need the operator's key."""

from __future__ import annotations

import functools
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
from league.events import EventValues, append_events, broadcast_all, event_values, record_event
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


@functools.cache
def log_key_advice() -> None:
    """Tell the operator how to let referees in: ``check_referee_key`` calls it on each refusal,
    and the cache makes that once per process (its ``cache_clear()`` lets it log again)."""
    log.warning("register_referee refused: no valid referee key; to let referees in, %s", HOW_TO_SET_THE_KEY)


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
    site_key: str = settings.REFEREE_KEY
    if isinstance(key, str) and key:
        # Compared as hashes: constant time, and any text (compare_digest refuses non-ASCII str).
        digest = hash_token(key)
        if site_key and hmac.compare_digest(digest, hash_token(site_key)):
            return
        if league.referee_key_hash and hmac.compare_digest(digest, league.referee_key_hash):
            return
    configured = bool(site_key or league.referee_key_hash)
    log_key_advice()
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


def open_for_registration() -> list[League]:
    """The leagues taking registrations now."""
    now = timezone.now()
    return [x for x in League.objects.filter(status=League.Status.REGISTERING) if x.registration_open(now)]


def registration_league(
    league_id: str | None, *, for_referee: bool = False, seat: str = "", open_leagues: list[League] | None = None
) -> League:
    """The league a registration goes to: the named one, or the one league open for registration,
    or (none open) the one in progress where ``seat`` is held: an agent registering again after
    its league closed registration, naming no league as the course's message does.
    ``open_leagues``: ``open_for_registration()``, when the caller has read it already."""
    if league_id:
        return queries.get_league(league_id)
    candidates = list(open_for_registration() if open_leagues is None else open_leagues)
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


@dataclass(frozen=True)
class RegistrationRequest:
    """One registration to run (``register_all``): what ``register_player`` and
    ``register_referee`` take, for either kind."""

    kind: str  # "player" or "referee"
    league_id: str | None
    meta: dict[str, Any]
    presented_token: str | None = None
    sender_id: str | None = None
    referee_key: Any = None
    relay_base: str | None = None
    client_host: str | None = None

    @property
    def model(self) -> type[Player] | type[Referee]:
        return Player if self.kind == "player" else Referee

    @property
    def relay(self) -> bool:
        """A player that cannot be reached connects out: the LM assigns it an endpoint on its
        relay (league/relay/), which the endpoint policy does not judge: the LM made it."""
        return self.kind == "player" and self.meta["contact_endpoint"] == CONNECT

    def check_protocol_version(self) -> None:
        """E018 for a protocol_version below 2.0.0 (a player's absent one is recorded as unknown)."""
        version = self.meta.get("protocol_version")
        if self.kind == "player" or version is not None:
            check_agent_protocol_version(version)


type Agent = Player | Referee


def register_all(
    requests: list[RegistrationRequest], *, record_events: bool = True
) -> list[Registration | LeagueError]:
    """Run ``requests`` in order, in one transaction, each answered as it would be on its own
    after the ones before it: its Registration, or the LeagueError that refuses it (E008, E012,
    E018), which leaves nothing of it written.

    Registrations that arrive together (league/mcp/registrations.py) cost one lock of their
    leagues, one read of the agents at their seats, one count per league and one insert of the
    new agents, whatever their number. ``record_events=False``: the caller appends each
    ``Registration.events`` itself, in the same transaction; broadcasts go out after the commit."""
    outcomes: list[Registration | LeagueError | None] = [None] * len(requests)
    seats: list[str] = []
    for n, request in enumerate(requests):
        try:
            request.check_protocol_version()
        except LeagueError as err:
            outcomes[n] = err
        # Resolved before the leagues' rows are locked: a slow name server holds up no one else.
        refused = outcomes[n] is not None
        seats.append("" if refused or request.relay else seat_endpoint(request.meta["contact_endpoint"]))
    # No savepoint of its own: a LeagueError is caught for its request only, before it writes
    # anything; any other error fails the caller's transaction as a whole.
    with transaction.atomic(savepoint=False):
        batch = _Batch([(r, seat) for r, seat, o in zip(requests, seats, outcomes, strict=True) if o is None])
        for n, (request, seat) in enumerate(zip(requests, seats, strict=True)):
            if outcomes[n] is None:
                try:
                    outcomes[n] = batch.register(request, seat)
                except LeagueError as err:  # written nothing of its own: the others go on
                    outcomes[n] = err
        batch.flush()
        accepted = [o for o in outcomes if isinstance(o, Registration) and o.status == "ACCEPTED"]
        if accepted:  # a new agent, or one back under a new name: the table moves on
            League.objects.filter(pk__in={o.league_pk for o in accepted}).changed()
        if record_events:
            append_events([row for o in outcomes if isinstance(o, Registration) for row in o.events])
        broadcast_all(batch.broadcasts)
    return [o for o in outcomes if o is not None]


class _Batch:
    """A batch of registrations (``register_all``): what it reads once, kept up to date as each
    registration is judged, so that each one's answer is the one it would get on its own.

    Read once: the named leagues (locked), the agents of both kinds at the batch's seats, and per
    league and kind the count and highest id (``_agents_summary``), the ids asked for, the seats
    per network. New agents wait in ``pending`` for one insert per kind; anything that reads the
    agents' table beyond that (a token's owner, a league found by seat, an agent registered again)
    writes the pending ones first (``flush``), so that it sees them."""

    def __init__(self, requests: list[tuple[RegistrationRequest, str]]) -> None:
        self.leagues: dict[int, League] = {}  # locked
        self.named: dict[str, League] = {}
        names = {r.league_id for r, _ in requests if r.league_id}
        if names:
            for league in League.objects.select_for_update().filter(league_id__in=names).order_by("pk"):
                self.named[league.league_id] = self.leagues[league.pk] = league
        self.open: list[League] | None = None  # open for registration (a request naming no league)
        # (kind's model, league pk, seat) -> the agent not removed there, None for none; only
        # what is known: the named leagues' seats of the batch, and what the batch changed.
        self.holders: dict[tuple[type[Agent], int, str], Agent | None] = {}
        self.read_seats = {seat for _, seat in requests if seat}
        self.read_leagues = set(self.leagues)
        if self.read_seats and self.read_leagues:
            for model in (Player, Referee):
                held = model.objects.filter(league_id__in=self.read_leagues, canonical_endpoint__in=self.read_seats)
                for agent in held.exclude(status=AgentStatus.REMOVED).order_by("pk"):
                    self.holders.setdefault((model, agent.league_id, agent.canonical_endpoint), agent)
        self.asked = {(r.kind, r.sender_id) for r, _ in requests if r.sender_id}
        self.summaries: dict[tuple[type[Agent], int], list[Any]] = {}  # [count not removed, highest id]
        self.taken_ids: dict[tuple[type[Agent], int], set[str]] = {}  # asked for, and in the table
        self.given_ids: dict[tuple[type[Agent], int], set[str]] = {}  # by this batch
        self.networks: dict[tuple[int, str], int] = {}
        self.pending: list[Agent] = []
        self.broadcasts: list[tuple[str, str, dict[str, Any]]] = []

    def flush(self) -> None:
        """Insert the new agents waiting, one insert per kind, in their order."""
        for model in (Player, Referee):
            rows = [agent for agent in self.pending if type(agent) is model]
            if rows:
                model.objects.bulk_create(rows)
        self.pending.clear()

    def league(self, request: RegistrationRequest, seat: str) -> League:
        """The league of ``request``, locked (``registration_league``)."""
        league = self.named.get(request.league_id) if request.league_id else None
        if league is None:  # none named (or no such league: registration_league says so)
            found = self._unnamed(request, seat) if not request.league_id else registration_league(request.league_id)
            league = self.leagues.get(found.pk)
            if league is None:
                league = self.leagues[found.pk] = League.objects.select_for_update().get(pk=found.pk)
        return league

    def _unnamed(self, request: RegistrationRequest, seat: str) -> League:
        if self.open is None:
            self.open = open_for_registration()
        if not self.open:
            self.flush()  # the league where the seat is held: new agents of this batch count
        return registration_league(None, for_referee=request.kind == "referee", seat=seat, open_leagues=self.open)

    def holder(self, model: type[Agent], league_pk: int, seat: str) -> Agent | None:
        """``endpoint_holder``, from what the batch knows when it can."""
        key = (model, league_pk, seat)
        if key in self.holders or (league_pk in self.read_leagues and seat in self.read_seats):
            return self.holders.get(key)
        self.flush()
        found = self.holders[key] = endpoint_holder(model, league_pk, seat)
        return found

    def summary(self, model: type[Agent], league_pk: int) -> list[Any]:
        """``[agents not removed, highest id]`` of the league's agents of a kind, this batch's included."""
        key = (model, league_pk)
        if key not in self.summaries:
            self.summaries[key] = list(_agents_summary(model, league_pk))
        return self.summaries[key]

    def id_free(self, model: type[Agent], league: League, kind: str, asked: str) -> bool:
        """Whether ``asked`` was never given in the league: one read of every id the batch asks for."""
        key = (model, league.pk)
        if asked in self.given_ids.get(key, ()):
            return False
        if key not in self.taken_ids:
            wanted = [agent_id for k, agent_id in self.asked if k == kind and REQUESTABLE_ID[kind].match(agent_id)]
            field_name = "player_id" if model is Player else "referee_id"
            taken = model.objects.filter(league=league, **{f"{field_name}__in": wanted})
            self.taken_ids[key] = set(taken.values_list(field_name, flat=True))
        return asked not in self.taken_ids[key]

    def new_id(self, model: type[Agent], league: League, kind: str, top: str | None, asked: str | None) -> str:
        """``_new_id``: the id asked for when in the league's form and free, else the one after the highest."""
        if asked and REQUESTABLE_ID[kind].match(asked) and self.id_free(model, league, kind, asked):
            return asked
        prefix = "P" if kind == "player" else "REF"
        if top is not None and not (top.startswith(prefix) and top[len(prefix) :].isdigit()):
            self.flush()  # an id made by hand: _next_id reads them all
        return _next_id(model, league, prefix, top)

    def seats_of(self, league: League, network: str) -> int:
        key = (league.pk, network)
        if key not in self.networks:
            self.networks[key] = _seats_of(league, network)
        return self.networks[key]

    def relay_name_taken(self, league: League, display_name: str | None) -> bool:
        """``_relay_name_taken``, this batch's new relay players included."""
        waiting = (
            isinstance(agent, Player)
            and agent.league_id == league.pk
            and agent.connection == Player.Connection.RELAY
            and agent.display_name == display_name
            for agent in self.pending
        )
        return bool(display_name) and (any(waiting) or _relay_name_taken(league, display_name))

    def added(self, model: type[Agent], league: League, agent: Agent, agent_id: str, network: str) -> None:
        """A new agent, to insert with the batch's others: the batch's counts and seats follow."""
        self.pending.append(agent)
        self.holders[(model, league.pk, agent.canonical_endpoint)] = agent
        summary = self.summary(model, league.pk)
        summary[0] += 1
        if summary[1] is None or (len(agent_id), agent_id) > (len(summary[1]), summary[1]):
            summary[1] = agent_id  # the order _agents_summary reads: longest, then greatest
        self.given_ids.setdefault((model, league.pk), set()).add(agent_id)
        if network and (league.pk, network) in self.networks:
            self.networks[(league.pk, network)] += 1

    def reissue(
        self, league: League, request: RegistrationRequest, same: Agent, endpoint: str, seat: str, *, held: str | None
    ) -> Registration:
        """``_reissue``, with the batch's seats following the agent."""
        if same.pk is None:
            self.flush()  # registered earlier in this batch: written before it is updated
        model = type(same)
        for key, agent in list(self.holders.items()):
            if type(agent) is model and agent.pk == same.pk:
                self.holders[key] = None  # the seat it leaves (another copy of its row: stale)
        registration = _reissue(
            league, request.kind, same, request.meta, endpoint, seat, relay=request.relay, held=held
        )
        self.holders[(model, league.pk, seat)] = same
        return registration

    def register(self, request: RegistrationRequest, seat: str) -> Registration:
        """One registration of the batch (docs/protocol.md, "Registering"): E012 (raised) for a
        referee without a valid key or a token that is not this league's; REJECTED when closed,
        full, game type or endpoint refused."""
        kind, model, relay, meta = request.kind, request.model, request.relay, request.meta
        endpoint = meta["contact_endpoint"]
        league = self.league(request, seat)
        if kind == "referee":
            check_referee_key(league, request.referee_key)
        other_kind = "referee" if kind == "player" else "player"

        def rejected(reason: str, agent_id: str | None = None) -> Registration:
            return Registration(league.league_id, "REJECTED", reason, agent_id, league_pk=league.pk)

        # A known agent re-registering with its token (or the one before its latest rotation,
        # whose reply it may have lost): its endpoint updated, its token rotated. Checked as a
        # new registration is: the game types, the endpoint's policy, and no other agent of the
        # league at that endpoint.
        if request.presented_token:
            self.flush()  # the token may be one this batch issued
            same = _token_owner(request.presented_token, kind, league, request.sender_id)
            game_types = meta.get("game_types")
            if game_types is not None and league.game_type not in game_types:
                return rejected(GAME_TYPE_NOT_SUPPORTED)
            if relay:
                if not request.relay_base:
                    return rejected(NO_RELAY_ADDRESS)
                endpoint = relay_endpoint(request.relay_base, league.league_id, same.player_id)
                seat = seat_endpoint(endpoint)
            problem = None if relay else _direct_endpoint_problem(endpoint, league.allowed_networks)
            if problem:
                return rejected(problem)
            holder = self.holder(model, league.pk, seat)
            if holder is not None and holder.pk != same.pk:
                return rejected(ENDPOINT_TAKEN)
            if self.holder(_other_model(model), league.pk, seat) is not None:
                return rejected(ENDPOINT_OF_OTHER_KIND.format(kind=other_kind))
            return self.reissue(league, request, same, endpoint, seat, held=hash_token(request.presented_token))

        # The same agent again without a token (its reply lost, a restart): the endpoint's agent,
        # in any league state, once the request shows it comes from the endpoint's own machine.
        if not relay:
            holder = self.holder(model, league.pk, seat)
            if holder is not None:
                holder_id = holder.player_id if kind == "player" else holder.referee_id
                if not same_host(request.client_host, seat):
                    return rejected(ENDPOINT_TAKEN_ADVICE.format(kind=kind, agent_id=holder_id), holder_id)
                problem = _direct_endpoint_problem(endpoint, league.allowed_networks)
                if problem:  # the spelling it gives now is the one it will be called at
                    return rejected(problem)
                return self.reissue(league, request, holder, endpoint, seat, held=None)

        if kind == "player":
            if not league.registration_open():
                return rejected(REGISTRATION_CLOSED)
        elif league.status not in (*queries.ACTIVE_STATUSES, League.Status.INITIALIZING):
            return rejected(REGISTRATION_CLOSED)
        if meta.get("game_types") is None:  # left out: the agent plays the league's game
            meta = {**meta, "game_types": [league.game_type]}
        if league.game_type not in meta["game_types"]:
            return rejected(GAME_TYPE_NOT_SUPPORTED)
        count, top = self.summary(model, league.pk)
        limit = league.max_players if kind == "player" else league.max_referees
        if count >= limit:
            return rejected(LEAGUE_FULL)
        if relay and not request.relay_base:
            return rejected(NO_RELAY_ADDRESS)
        problem = None if relay else _direct_endpoint_problem(endpoint, league.allowed_networks)
        if problem:
            return rejected(problem)
        if not relay and self.holder(_other_model(model), league.pk, seat) is not None:
            return rejected(ENDPOINT_OF_OTHER_KIND.format(kind=other_kind))
        if relay and self.relay_name_taken(league, meta.get("display_name")):
            return rejected(RELAY_NAME_TAKEN)
        network = network_of(request.client_host)
        limit = league.max_seats_per_network
        if limit and network and self.seats_of(league, network) >= limit:
            return rejected(NETWORK_FULL.format(limit=limit, network=network))

        agent_id = self.new_id(model, league, kind, top, request.sender_id)
        if relay:
            assert request.relay_base is not None
            endpoint = relay_endpoint(request.relay_base, league.league_id, agent_id)
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
            "self_named": _self_named(kind, request.sender_id, agent_id),
        }
        if kind == "player":
            fields["player_id"] = agent_id
            fields["protocol_version"] = meta.get("protocol_version") or UNKNOWN_PROTOCOL_VERSION
            fields["connection"] = Player.Connection.RELAY if relay else Player.Connection.DIRECT
        else:
            fields["referee_id"] = agent_id
            fields["max_concurrent_matches"] = meta.get("max_concurrent_matches") or 2
        self.added(model, league, model(**fields), agent_id, network)
        payload: dict[str, Any] = {"display_name": fields["display_name"], "endpoint": endpoint}
        if fields["self_named"]:
            payload["asked_for"] = fields["self_named"]
        row = event_values(league, "STATE", f"{kind}_registered", agent=agent_id, payload=payload)
        self.broadcasts.append(
            (
                league.league_id,
                f"{kind}_registered",
                {f"{kind}_id": agent_id, "display_name": fields["display_name"], "endpoint": endpoint},
            )
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
) -> Registration:
    """One player's registration (``register_all`` of one): E018 when protocol_version is given
    and below 2.0.0 (absent is fine: recorded as unknown); E012 for a token that is not this
    league's live player token, or one sent under another player's id; REJECTED when closed,
    full, game type or endpoint refused (docs/protocol.md, "Registering"). ``relay_base``: the
    LM's address for the endpoint of a player registering with "connect". ``sender_id``: what the
    sender calls itself (an id asked for, ``P07``); ``client_host``: the address the request came
    from (the proof of a registration again without a token, and the network whose seats are
    counted)."""
    request = RegistrationRequest(
        "player", league_id, player_meta, presented_token, sender_id, relay_base=relay_base, client_host=client_host
    )
    return _register_one(request)


def register_referee(
    league_id: str | None,
    referee_meta: dict[str, Any],
    presented_token: str | None,
    *,
    referee_key: Any,
    sender_id: str | None = None,
    client_host: str | None = None,
) -> Registration:
    """As ``register_player``, and first of all E012 without a valid ``referee_key``
    (``check_referee_key``)."""
    request = RegistrationRequest(
        "referee", league_id, referee_meta, presented_token, sender_id, referee_key, client_host=client_host
    )
    return _register_one(request)


def _register_one(request: RegistrationRequest) -> Registration:
    (outcome,) = register_all([request])
    if isinstance(outcome, LeagueError):
        raise outcome
    return outcome
