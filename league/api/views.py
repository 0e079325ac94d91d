"""The public REST API: read-only, token-less, paginated (settings.REST_FRAMEWORK)."""

from __future__ import annotations

from django.db.models import Count, IntegerField, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from league.api import readmodel, serializers
from league.models import League, Match, MatchResult, Player, Referee

LEAGUE_PARAM = OpenApiParameter("league_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="e.g. league_2025")
MATCH_PARAM = OpenApiParameter("match_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="e.g. R1M1")
PLAYER_PARAM = OpenApiParameter("player_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="e.g. P01")
REFEREE_PARAM = OpenApiParameter("referee_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="e.g. REF01")


def _count(model, **filters) -> Coalesce:
    """A per-league count as a subquery (joins of players × matches would multiply rows)."""
    rows = (
        model.objects.filter(league=OuterRef("pk"), **filters)
        .order_by()
        .values("league")
        .annotate(n=Count("id"))
        .values("n")
    )
    return Coalesce(Subquery(rows, output_field=IntegerField()), 0)


def leagues_with_counts():
    return League.objects.select_related("champion").annotate(
        player_count=_count(Player, status__in=("REGISTERED", "ACTIVE", "SUSPENDED")),
        referee_count=_count(Referee, status__in=("REGISTERED", "ACTIVE", "SUSPENDED")),
        matches_total=_count(Match),
        matches_finished=_count(Match, status=Match.Status.FINISHED),
    )


class LeagueViewSet(viewsets.ReadOnlyModelViewSet):
    """Leagues, newest first, with their standings, schedule and live snapshot."""

    serializer_class = serializers.LeagueSerializer
    lookup_field = "league_id"
    lookup_value_regex = r"[-\w]+"

    def get_queryset(self):
        qs = leagues_with_counts()
        status = self.request.query_params.get("status")
        return qs.filter(status=status.upper()) if status else qs

    @extend_schema(
        parameters=[OpenApiParameter("status", OpenApiTypes.STR, description="Only leagues in this status.")]
    )
    def list(self, request: Request, *args, **kwargs) -> Response:
        return super().list(request, *args, **kwargs)

    @extend_schema(responses=serializers.StandingSerializer(many=True))
    @action(detail=True, pagination_class=None)
    def standings(self, request: Request, league_id: str) -> Response:
        """Ranked by points, wins, draws, head-to-head, player id (PROTOCOL.md §7)."""
        return Response(readmodel.standings(self.get_object()))

    @extend_schema(responses=serializers.RoundSerializer(many=True))
    @action(detail=True, pagination_class=None)
    def schedule(self, request: Request, league_id: str) -> Response:
        """Every round with its matches and how far it got."""
        return Response(readmodel.rounds(self.get_object()))

    @extend_schema(responses=serializers.LiveSerializer)
    @action(detail=True, pagination_class=None)
    def live(self, request: Request, league_id: str) -> Response:
        """What the league page shows; the page catches up from here after a websocket drop."""
        return Response(readmodel.snapshot(self.get_object().league_id))


class LeagueScopedMixin:
    """Views under /api/leagues/<league_id>/…"""

    kwargs: dict

    def get_league(self) -> League:
        if not hasattr(self, "_league"):
            self._league = get_object_or_404(League, league_id=self.kwargs["league_id"])
        return self._league


@extend_schema_view(
    list=extend_schema(
        parameters=[
            LEAGUE_PARAM,
            OpenApiParameter("round", OpenApiTypes.INT, description="Round number."),
            OpenApiParameter("player", OpenApiTypes.STR, description="Matches of this player (e.g. P01)."),
            OpenApiParameter(
                "status",
                OpenApiTypes.STR,
                enum=[s for s, _ in Match.Status.choices],
                description="Match status.",
            ),
        ]
    ),
    retrieve=extend_schema(parameters=[LEAGUE_PARAM, MATCH_PARAM]),
    log=extend_schema(parameters=[LEAGUE_PARAM, MATCH_PARAM], responses=serializers.MatchLogSerializer),
)
class MatchViewSet(LeagueScopedMixin, viewsets.ReadOnlyModelViewSet):
    """Matches in schedule order, filterable by round, player and status."""

    serializer_class = serializers.MatchSerializer
    lookup_field = "match_id"
    queryset = Match.objects.none()  # for the schema; get_queryset scopes to the league

    def get_queryset(self):
        qs = readmodel.matches_queryset(self.get_league())
        params = self.request.query_params
        if params.get("round"):
            try:
                qs = qs.filter(round__number=int(params["round"]))
            except ValueError:
                raise ValidationError({"round": "must be a round number"}) from None
        if params.get("player"):
            player = params["player"]
            qs = qs.filter(Q(player_a__player_id=player) | Q(player_b__player_id=player))
        if params.get("status"):
            qs = qs.filter(status=params["status"].upper())
        return qs

    @action(detail=True, pagination_class=None)
    def log(self, request: Request, league_id: str, match_id: str) -> Response:
        """The referee's ordered message log of the match: the replay (empty until reported)."""
        match = self.get_object()
        try:
            result = match.result
        except MatchResult.DoesNotExist:
            result = None
        return Response(
            {
                "match_id": match.match_id,
                "referee_id": match.referee.referee_id if match.referee_id else None,
                "entries": (result.log if result else []) or [],
            }
        )


@extend_schema_view(
    list=extend_schema(parameters=[LEAGUE_PARAM]),
    retrieve=extend_schema(parameters=[LEAGUE_PARAM, PLAYER_PARAM], responses=serializers.PlayerDetailSerializer),
)
class PlayerViewSet(LeagueScopedMixin, viewsets.ReadOnlyModelViewSet):
    """Registered players; one player's page has its record, opponents and even/odd habits."""

    serializer_class = serializers.PlayerSerializer
    lookup_field = "player_id"
    queryset = Player.objects.none()

    def get_queryset(self):
        return Player.objects.filter(league=self.get_league()).order_by("id")

    def retrieve(self, request: Request, *args, **kwargs) -> Response:
        return Response(readmodel.player_profile(self.get_object()))


@extend_schema_view(
    list=extend_schema(parameters=[LEAGUE_PARAM]),
    retrieve=extend_schema(parameters=[LEAGUE_PARAM, REFEREE_PARAM], responses=serializers.RefereeDetailSerializer),
)
class RefereeViewSet(LeagueScopedMixin, viewsets.ReadOnlyModelViewSet):
    """Registered referees with their current load."""

    serializer_class = serializers.RefereeSerializer
    lookup_field = "referee_id"
    queryset = Referee.objects.none()

    def get_queryset(self):
        return (
            Referee.objects.filter(league=self.get_league())
            .annotate(
                running=Count("matches", filter=Q(matches__status__in=readmodel.RUNNING_MATCH), distinct=True),
                matches_reported=Coalesce(
                    Subquery(
                        MatchResult.objects.filter(referee=OuterRef("pk"))
                        .order_by()
                        .values("referee")
                        .annotate(n=Count("id"))
                        .values("n"),
                        output_field=IntegerField(),
                    ),
                    0,
                ),
            )
            .order_by("id")
        )

    def retrieve(self, request: Request, *args, **kwargs) -> Response:
        return Response(readmodel.referee_profile(self.get_object()))
