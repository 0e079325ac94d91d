"""The League Manager's state. The database is the single source of truth: every step of a
league is a recorded state transition, so any worker can pick up where a dead one stopped."""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable

from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from league.arena import identity_of
from league.seats import seat_endpoint
from leagueproto.endpoint_policy import DEFAULT_ALLOWED_NETWORKS  # the referees fall back on it too
from leagueproto.endpoints import canonical_endpoint as canonical_form
from leagueproto.jsonutil import OrjsonEncoder
from leagueproto.timeouts import DEFAULT_TIMEOUTS

# The one rule for league ids, everywhere one is typed (the ``league`` command, the admin, the API's
# URLs, the LM's messages): they go into URLs, websocket group names and file names unescaped.
LEAGUE_ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
LEAGUE_ID_RULE = "1-64 letters (a-z, A-Z), digits, underscores or hyphens, e.g. league_2025_even_odd"
_LEAGUE_ID = re.compile(LEAGUE_ID_PATTERN)


def league_id_problem(value: object) -> str | None:
    """Why ``value`` is not a valid league id (one sentence), or None when it is."""
    if isinstance(value, str) and _LEAGUE_ID.fullmatch(value):
        return None
    return f"league id {value!r} is not valid: use {LEAGUE_ID_RULE}"


def check_league_id(value: str) -> str:
    """``value`` if it is a valid league id; ValueError (the one message) otherwise. For pydantic
    models and plain code; the Django field uses ``validate_league_id``."""
    problem = league_id_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def validate_league_id(value: str) -> None:
    problem = league_id_problem(value)
    if problem:
        raise ValidationError(problem, code="invalid_league_id")


def game_type_choices() -> list[tuple[str, str]]:
    """The games a league can be created for: those the referees' game registry knows."""
    from referee.games import GAMES

    return [(name, name) for name in GAMES]


def hash_token(token: str) -> str:
    """Tokens carry ≥128 random bits, so a plain SHA-256 is enough (no password stretching)."""
    return hashlib.sha256(token.encode()).hexdigest()


def token_matches(token: str, token_hash: str) -> bool:
    return hmac.compare_digest(hash_token(token), token_hash)


class LeagueQuerySet(models.QuerySet):
    def in_progress(self) -> LeagueQuerySet:
        """Leagues registering, ready, running or paused."""
        return self.filter(status__in=IN_PROGRESS)

    def changed(self) -> int:
        """Move these leagues' ``version`` on. The one home of that: every write that changes
        what a league's standings read (a result recorded, a player registered or its status
        changed, a Swiss or knockout round played or completed) calls it in its transaction."""
        return self.update(version=models.F("version") + 1)


class League(models.Model):
    class Status(models.TextChoices):
        INITIALIZING = "INITIALIZING"
        REGISTERING = "REGISTERING"
        READY = "READY"
        RUNNING = "RUNNING"
        PAUSED = "PAUSED"
        COMPLETED = "COMPLETED"
        CANCELLED = "CANCELLED"

    class ScheduleFormat(models.TextChoices):
        SINGLE = "single", "Single round-robin"
        DOUBLE = "double", "Double round-robin (sides swapped)"
        SWISS = "swiss", "Swiss (each round drawn from the standings)"
        KNOCKOUT = "knockout", "Knockout (single elimination)"
        # A practice arena (league/arena.py): never completes, takes players while it runs,
        # pairs them continuously and rates every match.
        ARENA = "arena", "Practice arena (continuous, rated)"

    league_id = models.CharField(
        max_length=64,
        unique=True,
        validators=[validate_league_id],
        help_text=f"What agents send as league_id and the page's address: {LEAGUE_ID_RULE}.",
    )
    name = models.CharField(max_length=200)
    game_type = models.CharField(max_length=32, default="even_odd", choices=game_type_choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.INITIALIZING, db_index=True)
    schedule_format = models.CharField(max_length=8, choices=ScheduleFormat.choices, default=ScheduleFormat.SINGLE)
    # ``rounds`` is the reverse name of Round's league key, hence the longer name.
    swiss_rounds = models.PositiveIntegerField(
        default=0, help_text="Swiss only: how many rounds to play (at least 1, fewer than the players)."
    )

    registration_opens_at = models.DateTimeField(null=True, blank=True)
    registration_closes_at = models.DateTimeField(null=True, blank=True)
    min_players = models.PositiveIntegerField(default=2)
    max_players = models.PositiveIntegerField(default=200)
    max_referees = models.PositiveIntegerField(default=50)

    # Timeouts in seconds and the retry policy (docs/protocol.md); tests and benchmarks shrink them.
    join_timeout = models.FloatField(default=DEFAULT_TIMEOUTS.join)
    move_timeout = models.FloatField(default=DEFAULT_TIMEOUTS.move)
    game_over_timeout = models.FloatField(default=DEFAULT_TIMEOUTS.game_over)
    report_timeout = models.FloatField(default=DEFAULT_TIMEOUTS.report)
    default_timeout = models.FloatField(default=DEFAULT_TIMEOUTS.default)
    retries = models.PositiveIntegerField(default=3)
    retry_delay = models.FloatField(default=2.0)
    max_invalid_moves = models.PositiveIntegerField(default=3)
    # A match not reported this long after dispatch is reassigned to another referee.
    match_deadline = models.FloatField(default=300.0)
    # A pause between rounds so that people can follow a league live (the demo sets one).
    round_pause = models.FloatField(default=0.0, help_text="Seconds to wait after a round before the next.")
    # With no referee registered, run matches with the LM's built-in referee.
    embedded_referee = models.BooleanField(default=False)

    allowed_networks = models.TextField(
        default=DEFAULT_ALLOWED_NETWORKS,
        help_text="Comma-separated networks agent endpoints may live in (link-local is always refused).",
    )
    rate_limit_per_minute = models.PositiveIntegerField(default=600, help_text="Per token and per client address.")
    max_seats_per_network = models.PositiveIntegerField(
        default=0,
        help_text="At most this many agents may register from one network (a /24 of IPv4, a /64 of "
        "IPv6); 0: no limit. A class behind one NAT shares one network: leave 0 or set the class's size.",
    )
    # The league's own referee key, hashed like agent tokens (shown once when generated in the
    # admin); empty: none. A referee registers only with this key or the site's REFEREE_KEY.
    referee_key_hash = models.CharField(max_length=64, blank=True, default="", editable=False)

    current_round = models.PositiveIntegerField(default=0)
    champion = models.ForeignKey("Player", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    # Moved on by every write its standings depend on (``LeagueQuerySet.changed``): a reader
    # compares it with the one its cached table was built at, instead of re-reading the tables.
    version = models.PositiveBigIntegerField(default=0, editable=False)

    objects = LeagueQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.league_id})"

    def clean(self) -> None:
        problem = format_problem(self.schedule_format, self.swiss_rounds, self.max_players)
        if problem:
            raise ValidationError({"swiss_rounds" if "rounds" in problem else "schedule_format": problem})

    @property
    def draws_rounds(self) -> bool:
        """Swiss and knockout: each round is drawn when the one before it is played (a round-robin
        stores its whole schedule at the start)."""
        return self.schedule_format in DRAWN_FORMATS

    @property
    def is_arena(self) -> bool:
        return self.schedule_format == self.ScheduleFormat.ARENA

    def registration_open(self, now=None) -> bool:
        now = now or timezone.now()
        if self.is_arena:
            # An arena takes players for as long as it is open, paused included: joining is
            # how a student's agent starts practising, whenever in the term that is.
            return self.status in (self.Status.REGISTERING, self.Status.RUNNING, self.Status.PAUSED)
        if self.status != self.Status.REGISTERING:
            return False
        if self.registration_opens_at and now < self.registration_opens_at:
            return False
        return not (self.registration_closes_at and now >= self.registration_closes_at)


# The formats whose rounds are drawn one at a time, from the standings (league/conductor/draw.py).
DRAWN_FORMATS = (League.ScheduleFormat.SWISS, League.ScheduleFormat.KNOCKOUT)


def format_problem(schedule_format: str, swiss_rounds: int, players: int) -> str | None:
    """Why a league of ``players`` cannot be played in ``schedule_format`` (one sentence), or None.
    Checked when a league is created (``players``: its maximum) and when it starts (those registered)."""
    if schedule_format == League.ScheduleFormat.SWISS:
        if swiss_rounds < 1:
            return "a Swiss league needs its number of rounds (swiss_rounds, at least 1)"
        if swiss_rounds >= players:
            return (
                f"a Swiss league of {players} players can play at most {max(players - 1, 0)} rounds "
                f"(swiss_rounds is {swiss_rounds}): with as many rounds as players, someone would meet "
                "an opponent twice or sit out twice"
            )
    if schedule_format == League.ScheduleFormat.KNOCKOUT and players < 2:
        return f"a knockout needs at least 2 players ({players})"
    return None


# The statuses of a league in progress (``League.objects.in_progress()``).
IN_PROGRESS = (League.Status.REGISTERING, League.Status.READY, League.Status.RUNNING, League.Status.PAUSED)


class AgentStatus(models.TextChoices):
    INIT = "INIT"
    REGISTERED = "REGISTERED"
    ACTIVE = "ACTIVE"
    SUSPENDED = "SUSPENDED"
    SHUTDOWN = "SHUTDOWN"
    REMOVED = "REMOVED"


class AgentQuerySet(models.QuerySet):
    def holding(self, token_hashes: set[str] | list[str]) -> AgentQuerySet:
        """The agents whose token hash is one of ``token_hashes``, each with its league (what
        authenticating a call reads). Unordered: Meta.ordering would join and sort by the league
        for nothing, hashes being unique."""
        return self.select_related("league").filter(token_hash__in=token_hashes).order_by()


class Agent(models.Model):
    """What referees and players share: identity, endpoint, hashed token, liveness."""

    display_name = models.CharField(max_length=100)
    version = models.CharField(max_length=32, blank=True, default="")
    endpoint = models.URLField(max_length=500)
    # The endpoint as registrations compare it (league.seats.seat_endpoint), stored once so
    # that a seat is found by index (``league``, ``canonical_endpoint``), never by re-reading them all.
    canonical_endpoint = models.CharField(max_length=600, blank=True, default="")
    # The network a registration came from (league.endpoints.network_of: a /24 or /64), for the
    # league's cap on seats per network.
    registered_from = models.CharField(max_length=64, blank=True, default="")
    game_types = models.JSONField(default=list)
    status = models.CharField(max_length=16, choices=AgentStatus.choices, default=AgentStatus.REGISTERED)
    token_hash = models.CharField(max_length=64, db_index=True)
    # The hash of the token before the latest rotation: a registration presenting it gets the
    # agent back (the reply that carried the new token may have been lost). Cleared once the
    # new token has been used.
    previous_token_hash = models.CharField(max_length=64, blank=True, default="", db_index=True)
    # What the agent calls itself when that differs from its id (a fixed id of its own in its
    # replies' player_id or sender): shown on its page; the endpoint and token decide who it is.
    self_named = models.CharField(max_length=64, blank=True, default="")
    failures = models.PositiveIntegerField(default=0, help_text="Consecutive failures seen by the LM.")
    registered_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    # Set by the conductor when the agent stops answering at all (every call times out, is refused
    # or is too large); cleared when it answers a ping again. A player marked so loses its matches
    # technically at once (no referee waits out its timeouts again); a referee marked so is
    # SUSPENDED until it answers (an admin's suspension leaves this empty and is never undone).
    unreachable_since = models.DateTimeField(null=True, blank=True)
    unreachable_reason = models.CharField(max_length=300, blank=True, db_default="")
    # When the agent last answered the conductor's probe (a ping; any JSON-RPC answer counts),
    # refreshed at most once a minute. None: it has never answered, and a player that has never
    # answered when the schedule is drawn is withdrawn instead of handing its opponents free
    # wins (league/conductor/reachability.py, ``withdraw_silent_players``).
    answered_at = models.DateTimeField(null=True, blank=True)

    objects = AgentQuerySet.as_manager()

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        # The seat follows the endpoint, however it was set (registration, the admin, fixtures).
        # Registration has stored the seat already; only a host name can make the two differ
        # (a name of this machine is 127.0.0.1's seat), and then it is resolved once more.
        update_fields = kwargs.get("update_fields")
        endpoint_set = update_fields is None or "endpoint" in update_fields
        if self.endpoint and endpoint_set and self.canonical_endpoint != canonical_form(self.endpoint):
            self.canonical_endpoint = seat_endpoint(self.endpoint)
            if update_fields is not None:
                kwargs["update_fields"] = {*update_fields, "canonical_endpoint"}
        super().save(*args, **kwargs)

    def check_token(self, token: str) -> bool:
        return bool(token) and token_matches(token, self.token_hash)


class Referee(Agent):
    league = models.ForeignKey(League, on_delete=models.CASCADE, related_name="referees")
    referee_id = models.CharField(max_length=16)  # REF01, REF02 …
    max_concurrent_matches = models.PositiveIntegerField(default=2)

    class Meta:
        ordering = ["league", "id"]
        constraints = [models.UniqueConstraint(fields=["league", "referee_id"], name="unique_referee_id")]
        indexes = [
            models.Index(fields=["league", "canonical_endpoint"], name="referee_seat"),
            models.Index(fields=["league", "registered_from"], name="referee_network"),
        ]

    def __str__(self) -> str:
        return f"{self.referee_id} {self.display_name}"

    @property
    def sender(self) -> str:
        return f"referee:{self.referee_id}"


class Player(Agent):
    league = models.ForeignKey(League, on_delete=models.CASCADE, related_name="players")
    player_id = models.CharField(max_length=16)  # P01, P02 … P100
    protocol_version = models.CharField(max_length=32, default="2.0.0")

    class Connection(models.TextChoices):
        DIRECT = "direct", "Direct (its own endpoint)"
        RELAY = "relay", "Relay (connects out to the LM)"

    # How the LM and referees reach the player: its own endpoint, or the LM's relay
    # (league/relay/): the player keeps a WebSocket open to the LM and answers over it.
    connection = models.CharField(max_length=8, choices=Connection.choices, default=Connection.DIRECT)
    # The channel-layer name of the socket serving a relay player ("" while none is connected),
    # and when it last connected or dropped.
    relay_channel = models.CharField(max_length=200, blank=True, default="")
    relay_changed_at = models.DateTimeField(null=True, blank=True)

    # The sender the LM writes in its notices to this player: "" is the course's bare
    # ``league_manager``; an agent that refused it once gets ``league_manager:LM01`` from then on.
    lm_sender = models.CharField(max_length=32, blank=True, default="")

    # A knockout's seeding, fixed when its first round is drawn (league.formats): the later
    # rounds and the standings read it back, whatever the ratings it came from do afterwards.
    seed = models.PositiveIntegerField(null=True, blank=True, help_text="Knockout: its seed (1 the top).")

    class Meta:
        ordering = ["league", "id"]
        constraints = [models.UniqueConstraint(fields=["league", "player_id"], name="unique_player_id")]
        indexes = [
            models.Index(fields=["league", "canonical_endpoint"], name="player_seat"),
            models.Index(fields=["league", "registered_from"], name="player_network"),
        ]

    def __str__(self) -> str:
        return f"{self.player_id} {self.display_name}"

    @property
    def sender(self) -> str:
        return f"player:{self.player_id}"


class Round(models.Model):
    """One round of the schedule; its status records how far the conductor got with it."""

    class Status(models.TextChoices):
        PENDING = "PENDING"
        ANNOUNCED = "ANNOUNCED"  # ROUND_ANNOUNCEMENT sent, matches being dispatched
        PLAYED = "PLAYED"  # every match has a result
        COMPLETED = "COMPLETED"  # standings final; standings update and ROUND_COMPLETED sent (or owed)

    league = models.ForeignKey(League, on_delete=models.CASCADE, related_name="rounds")
    number = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    announced_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    notices_owed = models.BooleanField(
        default=False,
        help_text="COMPLETED, but its standings update, ROUND_COMPLETED and the next round's "
        "announcement are not yet recorded as sent: a conductor that finds this sends them again.",
    )

    class Meta:
        ordering = ["league", "number"]
        constraints = [models.UniqueConstraint(fields=["league", "number"], name="unique_round")]

    def __str__(self) -> str:
        return f"{self.league.league_id} R{self.number}"


class Bye(models.Model):
    """A round a player of a Swiss or knockout league sits out without a match (an odd count in
    Swiss, a top seed's first round in a knockout). It scores ``points`` (a win's, by
    leagueproto.scoring.BYE_POINTS) once its round is played; a player has at most one per round."""

    league = models.ForeignKey(League, on_delete=models.CASCADE, related_name="byes")
    round = models.ForeignKey(Round, on_delete=models.CASCADE, related_name="byes")
    player = models.ForeignKey("Player", on_delete=models.CASCADE, related_name="+")
    points = models.PositiveSmallIntegerField()

    class Meta:
        ordering = ["league", "round__number", "id"]
        constraints = [models.UniqueConstraint(fields=["round", "player"], name="unique_bye")]

    def __str__(self) -> str:
        return f"{self.round} bye {self.player.player_id}"


class MatchQuerySet(models.QuerySet):
    def with_sides(self) -> MatchQuerySet:
        """With the round, both players, the referee and the result loaded (what a match's
        description in a reply or a page shows)."""
        return self.select_related("round", "player_a", "player_b", "referee", "result")

    def of_player(self, player_pk: int) -> MatchQuerySet:
        """The matches a player plays, on either side."""
        return self.filter(models.Q(player_a_id=player_pk) | models.Q(player_b_id=player_pk))


class Match(models.Model):
    class Status(models.TextChoices):
        SCHEDULED = "SCHEDULED"
        ASSIGNED = "ASSIGNED"  # start_match sent to a referee (or about to be)
        RUNNING = "RUNNING"  # the referee accepted it
        FINISHED = "FINISHED"
        CANCELLED = "CANCELLED"

    league = models.ForeignKey(League, on_delete=models.CASCADE, related_name="matches")
    round = models.ForeignKey(Round, on_delete=models.CASCADE, related_name="matches")
    match_id = models.CharField(max_length=16)  # R{round}M{n}
    player_a = models.ForeignKey(Player, on_delete=models.CASCADE, related_name="+")
    player_b = models.ForeignKey(Player, on_delete=models.CASCADE, related_name="+")
    game_type = models.CharField(max_length=32)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.SCHEDULED, db_index=True)
    referee = models.ForeignKey(Referee, null=True, blank=True, on_delete=models.SET_NULL, related_name="matches")
    attempt = models.PositiveIntegerField(default=0, help_text="How many times it was dispatched.")
    assigned_at = models.DateTimeField(null=True, blank=True)
    deadline_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = MatchQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "matches"
        ordering = ["league", "round__number", "id"]
        constraints = [models.UniqueConstraint(fields=["league", "match_id"], name="unique_match_id")]
        indexes = [models.Index(fields=["league", "status"])]

    def __str__(self) -> str:
        return f"{self.match_id} {self.player_a.player_id}-{self.player_b.player_id}"


class MatchResult(models.Model):
    """Exactly one per match: the one-to-one key is what makes results count once."""

    class Outcome(models.TextChoices):
        WIN_A = "WIN_A"
        WIN_B = "WIN_B"
        DRAW = "DRAW"
        BOTH_LOSE = "BOTH_LOSE"  # both players failed: a technical loss each

    match = models.OneToOneField(Match, on_delete=models.CASCADE, related_name="result")
    league = models.ForeignKey(League, on_delete=models.CASCADE, related_name="results")
    referee = models.ForeignKey(Referee, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    outcome = models.CharField(max_length=12, choices=Outcome.choices)
    winner = models.ForeignKey(Player, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    points_a = models.PositiveSmallIntegerField()
    points_b = models.PositiveSmallIntegerField()
    technical_loss_a = models.BooleanField(default=False)
    technical_loss_b = models.BooleanField(default=False)
    details = models.JSONField(default=dict, encoder=OrjsonEncoder, help_text="Choices, drawn number, rounds, reasons.")
    log = models.JSONField(
        default=list, encoder=OrjsonEncoder, help_text="The referee's ordered message log (for the replay)."
    )
    report_digest = models.CharField(
        max_length=64, help_text="Digest of the report, to tell duplicates from conflicts."
    )
    reported_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["league", "id"]

    def __str__(self) -> str:
        return f"{self.match.match_id}: {self.outcome}"


class EventQuerySet(models.QuerySet):
    def update(self, **kwargs):  # the log is append-only
        raise TypeError("the event log is append-only")

    def delete(self):
        raise TypeError("the event log is append-only")


class Event(models.Model):
    """Append-only log of every protocol message the LM receives or sends, and each transition."""

    class Direction(models.TextChoices):
        IN = "IN"
        OUT = "OUT"
        STATE = "STATE"

    # No index of its own: Meta's (league, id) serves every lookup by league, and an index less
    # is less work for each of the ~55,000 rows a 100-player league appends.
    league = models.ForeignKey(
        League, null=True, blank=True, on_delete=models.CASCADE, related_name="events", db_index=False
    )
    at = models.DateTimeField(default=timezone.now, db_index=True)
    direction = models.CharField(max_length=5, choices=Direction.choices)
    kind = models.CharField(max_length=40, help_text="Message type, or the name of a state transition.")
    agent = models.CharField(max_length=40, blank=True, default="", help_text="Sender or recipient.")
    match_id = models.CharField(max_length=16, blank=True, default="")
    payload = models.JSONField(default=dict)

    objects = EventQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["league", "id"])]

    def __str__(self) -> str:
        return f"{self.at:%H:%M:%S} {self.direction} {self.kind} {self.agent}"

    def save(self, *args, **kwargs):
        if self.pk is not None and not kwargs.get("force_insert"):
            raise TypeError("the event log is append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise TypeError("the event log is append-only")


# -- the practice arena and ratings (league/arena.py) -------------------------------------------


class Arena(models.Model):
    """The settings of a league whose schedule_format is ``arena``: one row per arena, made with
    its defaults the first time the conductor or the admin needs it."""

    league = models.OneToOneField(League, on_delete=models.CASCADE, primary_key=True, related_name="arena")
    max_matches_per_hour = models.PositiveIntegerField(
        default=600,
        help_text="At most this many matches per agent in each hour from its first match of that hour "
        "(house bots have no cap); 0: no cap.",
    )
    house_prefix = models.CharField(
        max_length=32,
        default="house",
        blank=True,
        help_text="Players whose display name starts with this are house bots: an agent plays one when "
        "no other agent is free. Empty: no house bots.",
    )
    rest_base = models.FloatField(default=2.0, help_text="Seconds an agent rests after its first technical loss.")
    rest_max = models.FloatField(default=300.0, help_text="The longest rest, however many failures in a row.")
    matches_created = models.PositiveIntegerField(default=0, help_text="The arena's matches are A1, A2 …")

    def __str__(self) -> str:
        return f"arena {self.league.league_id}"


class ArenaSeat(models.Model):
    """A player of an arena as the pairing sees it: who it is across leagues, whether it is a
    house bot, and its rest after failures (technical losses in a row)."""

    player = models.OneToOneField(Player, on_delete=models.CASCADE, primary_key=True, related_name="arena_seat")
    league = models.ForeignKey(League, on_delete=models.CASCADE, related_name="+")
    identity = models.CharField(max_length=620, help_text="league.arena.identity_of: the key of its rating.")
    house = models.BooleanField(default=False)
    failures = models.PositiveIntegerField(default=0, help_text="Technical losses in a row.")
    rested_until = models.DateTimeField(null=True, blank=True)
    # The hourly cap's count: matches made for the agent since ``hour_began`` (its first match of
    # the hour), kept here so that the cap costs no scan of the arena's matches.
    hour_began = models.DateTimeField(null=True, blank=True)
    hour_matches = models.PositiveIntegerField(default=0)

    class Meta:
        indexes = [models.Index(fields=["league", "rested_until"], name="arena_seat_rest")]

    def __str__(self) -> str:
        return f"{self.player} ({self.identity})"


class RatingQuerySet(models.QuerySet):
    def of_players(self, game_type: str, players: Iterable[Player]) -> dict[int, Rating]:
        """The ratings in ``game_type`` of these players (player pk → rating), by their arena
        identity (league.arena.identity_of): the same key whichever arena or league they are
        seen in. A player never rated is left out."""
        identity = {p.pk: identity_of(p.connection, p.canonical_endpoint, p.display_name) for p in players}
        by_identity = {r.identity: r for r in self.filter(game_type=game_type, identity__in=set(identity.values()))}
        return {pk: by_identity[i] for pk, i in identity.items() if i in by_identity}


class Rating(models.Model):
    """An agent's rating in one game, across every arena it plays (league.ratings)."""

    identity = models.CharField(max_length=620)
    game_type = models.CharField(max_length=32)
    display_name = models.CharField(max_length=100, blank=True, default="")
    mu = models.FloatField()
    sigma = models.FloatField()
    ordinal = models.FloatField(db_index=True, help_text="mu - 3 sigma: what the leaderboard ranks by.")
    matches = models.PositiveIntegerField(default=0)
    wins = models.PositiveIntegerField(default=0)
    draws = models.PositiveIntegerField(default=0)
    losses = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(default=timezone.now)

    objects = RatingQuerySet.as_manager()

    class Meta:
        ordering = ["-ordinal", "id"]
        constraints = [models.UniqueConstraint(fields=["identity", "game_type"], name="unique_rating")]

    def __str__(self) -> str:
        return f"{self.display_name or self.identity} {self.game_type}: {self.ordinal:.2f}"


class RatingChange(models.Model):
    """One rated match of one agent: its rating after it. Unique per (rating, match), so a
    match moves a rating once however often its result is reported."""

    class Result(models.TextChoices):
        WIN = "W"
        DRAW = "D"
        LOSS = "L"

    rating = models.ForeignKey(Rating, on_delete=models.CASCADE, related_name="changes")
    match = models.ForeignKey(Match, on_delete=models.CASCADE, related_name="rating_changes")
    league = models.ForeignKey(League, on_delete=models.CASCADE, related_name="+")
    player = models.ForeignKey(Player, on_delete=models.CASCADE, related_name="rating_changes")
    result = models.CharField(max_length=1, choices=Result.choices)
    technical = models.BooleanField(default=False, help_text="Lost technically (no answer, invalid moves).")
    opponent = models.CharField(max_length=100, blank=True, default="", help_text="Its display name then.")
    mu = models.FloatField()
    sigma = models.FloatField()
    ordinal = models.FloatField()
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["rating", "match"], name="one_change_per_match")]
        indexes = [models.Index(fields=["league", "id"], name="rating_change_league")]

    def __str__(self) -> str:
        return f"{self.match.match_id} {self.result} {self.ordinal:.2f}"
