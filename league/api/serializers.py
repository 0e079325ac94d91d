"""Serializers of the public, read-only REST API. Fields are listed one by one: a token hash,
an endpoint's secret or anything not named here never leaves the server."""

from __future__ import annotations

from typing import get_args

from rest_framework import serializers

from league.api import readmodel
from league.models import League, Match, Player, Referee
from leagueproto.scoring import TieBreak


class LeagueSerializer(serializers.ModelSerializer):
    players = serializers.IntegerField(source="player_count", read_only=True)
    referees = serializers.IntegerField(source="referee_count", read_only=True)
    matches_total = serializers.IntegerField(read_only=True)
    matches_finished = serializers.IntegerField(read_only=True)
    registration_open = serializers.SerializerMethodField()
    champion = serializers.SlugRelatedField(slug_field="player_id", read_only=True, allow_null=True)

    class Meta:
        model = League
        fields = [
            "league_id",
            "name",
            "game_type",
            "status",
            "schedule_format",
            "swiss_rounds",
            "registration_open",
            "registration_opens_at",
            "registration_closes_at",
            "min_players",
            "max_players",
            "players",
            "referees",
            "current_round",
            "matches_total",
            "matches_finished",
            "champion",
            "created_at",
            "started_at",
            "completed_at",
        ]

    def get_registration_open(self, league: League) -> bool:
        return league.registration_open()


class FormSerializer(serializers.Serializer):
    mark = serializers.ChoiceField(choices=["W", "D", "L"])
    match_id = serializers.CharField()
    technical = serializers.BooleanField()
    score = serializers.CharField()


class StandingSerializer(serializers.Serializer):
    rank = serializers.IntegerField()
    player_id = serializers.CharField()
    display_name = serializers.CharField()
    status = serializers.CharField()
    played = serializers.IntegerField()
    wins = serializers.IntegerField()
    draws = serializers.IntegerField()
    losses = serializers.IntegerField()
    technical_losses = serializers.IntegerField()
    points = serializers.IntegerField()
    decided_by = serializers.ChoiceField(
        choices=list(get_args(TieBreak)),
        allow_null=True,
        help_text="The rule that placed this row below the one above (null for the first).",
    )
    decided_by_text = serializers.CharField()
    buchholz = serializers.IntegerField(
        required=False, help_text="Swiss leagues only: the sum of the points of the opponents the player met."
    )
    byes = serializers.IntegerField(required=False, help_text="Swiss leagues only: rounds sat out (each a win).")
    seed = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        help_text="Knockout leagues only: the player's seed (1 the top), fixed when round 1 is drawn; null before.",
    )
    rank_change = serializers.IntegerField(
        allow_null=True, help_text="Places moved since the latest round began (positive: up)."
    )
    form = FormSerializer(many=True, help_text="The last five results, oldest first.")


class ResultRowSerializer(serializers.Serializer):
    round = serializers.IntegerField()
    match_id = serializers.CharField()
    player_a_id = serializers.CharField()
    player_a_name = serializers.CharField()
    player_b_id = serializers.CharField()
    player_b_name = serializers.CharField()
    winner_id = serializers.CharField(allow_null=True)
    points_a = serializers.IntegerField()
    points_b = serializers.IntegerField()
    score = serializers.CharField(help_text="Side A first: games won (best-of-5) or points.")
    technical_loss = serializers.CharField(help_text="Space-separated ids of players who lost technically.")
    choice_a = serializers.CharField(allow_null=True)
    choice_b = serializers.CharField(allow_null=True)
    drawn_number = serializers.IntegerField(allow_null=True)
    referee_id = serializers.CharField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


class ScheduledMatchSerializer(serializers.Serializer):
    match_id = serializers.CharField()
    player_a = serializers.CharField()
    player_b = serializers.CharField()
    status = serializers.CharField()
    referee_id = serializers.CharField(allow_null=True)


class RoundSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    status = serializers.CharField()
    announced_at = serializers.DateTimeField(allow_null=True)
    completed_at = serializers.DateTimeField(allow_null=True)
    matches_total = serializers.IntegerField()
    matches_finished = serializers.IntegerField()
    # null on a big league's page for a round neither in play, last completed nor next
    # (readmodel.page_rounds); the schedule API lists every round's.
    matches = ScheduledMatchSerializer(many=True, allow_null=True)


class PlayerRefSerializer(serializers.Serializer):
    player_id = serializers.CharField()
    display_name = serializers.CharField()


class ResultSerializer(serializers.Serializer):
    outcome = serializers.CharField()
    status = serializers.ChoiceField(choices=["WIN", "DRAW", "TECHNICAL_LOSS"])
    winner = serializers.CharField(allow_null=True)
    score = serializers.DictField(child=serializers.IntegerField())
    technical_loss = serializers.ListField(child=serializers.CharField())
    choices = serializers.DictField(child=serializers.CharField())
    drawn_number = serializers.IntegerField(allow_null=True)
    number_parity = serializers.CharField(allow_null=True)
    round_scores = serializers.JSONField(allow_null=True)
    reason = serializers.CharField(allow_blank=True)
    reported_at = serializers.DateTimeField(allow_null=True)
    log_entries = serializers.IntegerField()


class MatchSerializer(serializers.Serializer):
    """A match and, once finished, its result (as :func:`readmodel.match_summary` shapes it)."""

    match_id = serializers.CharField()
    round = serializers.IntegerField()
    game_type = serializers.CharField()
    status = serializers.ChoiceField(choices=Match.Status.choices)
    player_a = PlayerRefSerializer()
    player_b = PlayerRefSerializer()
    referee_id = serializers.CharField(allow_null=True)
    assigned_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    result = ResultSerializer(allow_null=True)

    def to_representation(self, instance):
        return readmodel.match_summary(instance) if isinstance(instance, Match) else instance


class LogEntrySerializer(serializers.Serializer):
    """One entry of the referee's match log (docs/protocol.md, "The report to the LM")."""

    seq = serializers.IntegerField(required=False)
    at = serializers.CharField(required=False)
    t_ms = serializers.IntegerField(required=False)
    direction = serializers.CharField(required=False)
    peer = serializers.CharField(required=False)
    method = serializers.CharField(required=False)
    message_type = serializers.CharField(required=False)
    outcome = serializers.CharField(required=False)
    attempt = serializers.IntegerField(required=False)
    latency_ms = serializers.FloatField(required=False, allow_null=True)
    message = serializers.JSONField(required=False)


class MatchLogSerializer(serializers.Serializer):
    match_id = serializers.CharField()
    referee_id = serializers.CharField(allow_null=True)
    entries = LogEntrySerializer(many=True)


class PlayerSerializer(serializers.ModelSerializer):
    class Meta:
        model = Player
        fields = [
            "player_id",
            "display_name",
            "version",
            "protocol_version",
            "game_types",
            "status",
            "registered_at",
            "last_seen_at",
            "unreachable_since",
            "unreachable_reason",
        ]


class OpponentSerializer(serializers.Serializer):
    player_id = serializers.CharField()
    display_name = serializers.CharField()
    played = serializers.IntegerField()
    wins = serializers.IntegerField()
    draws = serializers.IntegerField()
    losses = serializers.IntegerField()
    points_for = serializers.IntegerField()


class ParitySerializer(serializers.Serializer):
    even = serializers.IntegerField()
    odd = serializers.IntegerField()
    even_percent = serializers.IntegerField(allow_null=True)


class ArenaRatingSerializer(serializers.Serializer):
    rating = serializers.FloatField(help_text="The ordinal, mu - 3 sigma: what the arena ranks by.")
    mu = serializers.FloatField()
    sigma = serializers.FloatField(help_text="The rating's uncertainty.")
    matches = serializers.IntegerField()


class PlayerDetailSerializer(serializers.Serializer):
    player_id = serializers.CharField()
    display_name = serializers.CharField()
    status = serializers.CharField()
    version = serializers.CharField()
    game_types = serializers.ListField(child=serializers.CharField())
    registered_at = serializers.DateTimeField(allow_null=True)
    last_seen_at = serializers.DateTimeField(allow_null=True)
    unreachable_since = serializers.DateTimeField(
        allow_null=True, help_text="Set while the league cannot reach the player: its matches are lost technically."
    )
    unreachable_reason = serializers.CharField(allow_blank=True, help_text="Why it was marked unreachable.")
    standing = StandingSerializer(allow_null=True)
    arena_rating = ArenaRatingSerializer(
        allow_null=True, help_text="Its practice-arena rating in this game, across arenas (None: never rated)."
    )
    parity = ParitySerializer()
    opponents = OpponentSerializer(many=True)
    matches = MatchSerializer(many=True)


class RefereeSerializer(serializers.ModelSerializer):
    running = serializers.IntegerField(read_only=True)
    matches_reported = serializers.IntegerField(read_only=True)

    class Meta:
        model = Referee
        fields = [
            "referee_id",
            "display_name",
            "version",
            "game_types",
            "status",
            "max_concurrent_matches",
            "running",
            "matches_reported",
            "registered_at",
            "last_seen_at",
        ]


class RefereeDetailSerializer(serializers.Serializer):
    referee_id = serializers.CharField()
    display_name = serializers.CharField()
    status = serializers.CharField()
    version = serializers.CharField()
    game_types = serializers.ListField(child=serializers.CharField())
    registered_at = serializers.DateTimeField(allow_null=True)
    last_seen_at = serializers.DateTimeField(allow_null=True)
    max_concurrent_matches = serializers.IntegerField()
    running = serializers.IntegerField()
    load_percent = serializers.IntegerField()
    matches_reported = serializers.IntegerField()
    matches_assigned = serializers.IntegerField()
    failures = serializers.IntegerField()
    matches = MatchSerializer(many=True)


class ProgressSerializer(serializers.Serializer):
    matches_total = serializers.IntegerField()
    matches_finished = serializers.IntegerField()
    matches_running = serializers.IntegerField()
    rounds_total = serializers.IntegerField()
    rounds_completed = serializers.IntegerField()
    current_round = serializers.IntegerField()
    percent = serializers.IntegerField()


class ChartSeriesSerializer(serializers.Serializer):
    player_id = serializers.CharField()
    display_name = serializers.CharField()
    points = serializers.ListField(child=serializers.IntegerField())


class ChartSerializer(serializers.Serializer):
    rounds = serializers.ListField(child=serializers.CharField())
    series = ChartSeriesSerializer(many=True)


class LeagueSummarySerializer(serializers.Serializer):
    league_id = serializers.CharField()
    name = serializers.CharField()
    game_type = serializers.CharField()
    status = serializers.CharField()
    schedule_format = serializers.CharField()
    registration_open = serializers.BooleanField()
    registration_opens_at = serializers.DateTimeField(allow_null=True)
    registration_closes_at = serializers.DateTimeField(allow_null=True)
    min_players = serializers.IntegerField()
    max_players = serializers.IntegerField()
    players = serializers.IntegerField()
    referees = serializers.IntegerField()
    current_round = serializers.IntegerField()
    champion = PlayerRefSerializer(allow_null=True)
    created_at = serializers.DateTimeField(allow_null=True)
    started_at = serializers.DateTimeField(allow_null=True)
    completed_at = serializers.DateTimeField(allow_null=True)


class LiveSerializer(serializers.Serializer):
    """Everything the live league page shows (also the websocket's first message)."""

    league = LeagueSummarySerializer()
    note = serializers.CharField(help_text="Where the league stands, in one sentence.")
    progress = ProgressSerializer()
    standings = StandingSerializer(many=True)
    rounds = RoundSerializer(many=True)
    recent_matches = MatchSerializer(many=True)
    chart = ChartSerializer()
