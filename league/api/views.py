"""The public REST API: read-only, token-less, paginated (settings.REST_FRAMEWORK)."""

from __future__ import annotations

import csv
import io
from typing import Any

from django.db.models import Count, IntegerField, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.http import Http404, HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import routers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.settings import api_settings

from league.api import live, profiles, readmodel, serializers
from league.models import AgentStatus, League, Match, MatchResult, Player, Referee, league_id_problem

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


# Agents a league counts as its own: all but those removed (the league page counts the same).
COUNTED_AGENTS = [s for s in AgentStatus.values if s != AgentStatus.REMOVED]
LIVE_AGENTS = [AgentStatus.REGISTERED, AgentStatus.ACTIVE]  # the ones that play: the headline counts


def leagues_with_counts():
    return League.objects.select_related("champion").annotate(
        player_count=_count(Player, status__in=COUNTED_AGENTS),
        referee_count=_count(Referee, status__in=COUNTED_AGENTS),
        players_live=_count(Player, status__in=LIVE_AGENTS),
        players_suspended=_count(Player, status=AgentStatus.SUSPENDED),
        players_exited=_count(Player, status=AgentStatus.SHUTDOWN),
        referees_live=_count(Referee, status__in=LIVE_AGENTS),
        referees_suspended=_count(Referee, status=AgentStatus.SUSPENDED),
        referees_exited=_count(Referee, status=AgentStatus.SHUTDOWN),
        matches_total=_count(Match),
        matches_finished=_count(Match, status=Match.Status.FINISHED),
    )


# A cell that starts like a formula is run by spreadsheets: a display name is the agent's choice.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


class CSVRenderer(BaseRenderer):
    """Lists of rows as CSV (``standings.csv``, ``results.csv`` or ``?format=csv``), for a
    spreadsheet: the columns are the view's ``csv_columns`` for its action, in that order."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        context = renderer_context or {}
        view, response = context.get("view"), context.get("response")
        rows = data if isinstance(data, list) else [data]
        columns = getattr(view, "csv_columns", {}).get(getattr(view, "action", None)) or (
            list(rows[0]) if rows and isinstance(rows[0], dict) else []
        )
        if response is not None and response.status_code == 200 and view is not None:
            name = f"{view.kwargs.get('league_id', 'league')}-{view.action}.csv"
            response["Content-Disposition"] = f'attachment; filename="{name}"'
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(columns)
        for row in rows:
            if isinstance(row, dict):
                writer.writerow([_cell(row.get(column)) for column in columns])
        return out.getvalue().encode(self.charset)


WITH_CSV = [*api_settings.DEFAULT_RENDERER_CLASSES, CSVRenderer]
STANDINGS_CSV = [
    "rank",
    "player_id",
    "display_name",
    "played",
    "wins",
    "draws",
    "losses",
    "technical_losses",
    "points",
    "decided_by",
]
# The tie-break columns a format's league page shows beside the points (a Swiss league's Bh).
FORMAT_STANDINGS_CSV = {League.ScheduleFormat.SWISS: ["buchholz", "byes"]}


def standings_csv_columns(schedule_format: str) -> list[str]:
    """standings.csv's columns for a league of this format: the format's tie-break columns
    right after the points, as on the page."""
    after = STANDINGS_CSV.index("points") + 1
    return [*STANDINGS_CSV[:after], *FORMAT_STANDINGS_CSV.get(schedule_format, []), *STANDINGS_CSV[after:]]


RESULTS_CSV = [
    "round",
    "match_id",
    "player_a_id",
    "player_a_name",
    "player_b_id",
    "player_b_name",
    "winner_id",
    "points_a",
    "points_b",
    "score",
    "technical_loss",
    "choice_a",
    "choice_b",
    "drawn_number",
    "referee_id",
    "finished_at",
]


def finished_match_rows(league: League) -> list[dict[str, Any]]:
    """Every finished match as one flat row (``results`` and results.csv)."""
    rows = []
    for match in readmodel.summaries_queryset(league).filter(status=Match.Status.FINISHED):
        m = readmodel.match_summary(match)
        r = m["result"]
        if r is None:
            continue
        a, b = m["player_a"]["player_id"], m["player_b"]["player_id"]
        rows.append(
            {
                "round": m["round"],
                "match_id": m["match_id"],
                "player_a_id": a,
                "player_a_name": m["player_a"]["display_name"],
                "player_b_id": b,
                "player_b_name": m["player_b"]["display_name"],
                "winner_id": r["winner"],
                "points_a": r["score"].get(a),
                "points_b": r["score"].get(b),
                "score": r["label"],
                "technical_loss": " ".join(r["technical_loss"]),
                "choice_a": r["choices"].get(a),
                "choice_b": r["choices"].get(b),
                "drawn_number": r["drawn_number"],
                "referee_id": m["referee_id"],
                "finished_at": m["finished_at"],
            }
        )
    return rows


class LeagueViewSet(viewsets.ReadOnlyModelViewSet):
    """Leagues, newest first, with their standings, schedule and live snapshot."""

    serializer_class = serializers.LeagueSerializer
    csv_columns = {"standings": STANDINGS_CSV, "results": RESULTS_CSV}
    lookup_field = "league_id"
    lookup_value_regex = r"[^/]+"

    def get_object(self) -> League:
        return find_league(self.kwargs["league_id"], self.get_queryset())

    def handle_exception(self, exc: Exception) -> Response:
        # An error is JSON whatever was asked for: a CSV of {"detail": …} helps no one.
        response = super().handle_exception(exc)
        if isinstance(getattr(self.request, "accepted_renderer", None), CSVRenderer):
            self.request.accepted_renderer = JSONRenderer()
            self.request.accepted_media_type = JSONRenderer.media_type
        return response

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
    @action(detail=True, pagination_class=None, renderer_classes=WITH_CSV)
    def standings(self, request: Request, league_id: str, format: str | None = None) -> Response:
        """Ranked by points, wins, draws, head-to-head, player id; ``decided_by`` names the rule
        that placed each row below the one above (also as standings.csv, with a Swiss league's
        Buchholz)."""
        league = self.get_object()
        self.csv_columns = {**self.csv_columns, "standings": standings_csv_columns(league.schedule_format)}
        return Response(readmodel.standings(league))

    @extend_schema(responses=serializers.ResultRowSerializer(many=True))
    @action(detail=True, pagination_class=None, renderer_classes=WITH_CSV)
    def results(self, request: Request, league_id: str, format: str | None = None) -> Response:
        """Every finished match as a flat row (also as results.csv): who played whom, the result,
        the choices, the referee."""
        return Response(finished_match_rows(self.get_object()))

    @extend_schema(
        responses=serializers.RoundSerializer(many=True),
        parameters=[OpenApiParameter("round", OpenApiTypes.INT, description="Only this round (its number).")],
    )
    @action(detail=True, pagination_class=None)
    def schedule(self, request: Request, league_id: str) -> Response:
        """Every round with its matches and how far it got (``?round=N``: round N only)."""
        league = self.get_object()
        given = request.query_params.get("round")
        if given is None:
            return Response(readmodel.rounds(league))
        try:
            number = int(given)
        except ValueError:
            raise ValidationError({"round": "must be a round number"}) from None
        # Any integer is a round number; one no round can have (0, negative, past the column) has none.
        return Response(readmodel.rounds(league, number=number) if 0 < number < 2**31 else [])

    @extend_schema(responses=serializers.LiveSerializer)
    @action(detail=True, pagination_class=None)
    def live(self, request: Request, league_id: str) -> Response:
        """What the league page shows, at the league's current version (built once per version
        and shared by every reader, ``league.api.live``)."""
        snapshot = live.current(league_id)
        if snapshot is None:
            find_league(league_id)  # the 404 that says why
        return HttpResponse(snapshot.blob, content_type="application/json")


def find_league(league_id: str, queryset=None) -> League:
    """The league, or a 404 that says why: no such league, or an id that breaks the rule."""
    league = (queryset if queryset is not None else League.objects).filter(league_id=league_id).first()
    if league is None:
        raise Http404(league_id_problem(league_id) or f"no league {league_id!r}")
    return league


class LeagueScopedMixin:
    """Views under /api/leagues/<league_id>/…"""

    kwargs: dict

    def get_league(self) -> League:
        if not hasattr(self, "_league"):
            self._league = find_league(self.kwargs["league_id"])
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
        league = self.get_league()
        # A match's log is in its result's row: read with the match, not left for a second query.
        qs = readmodel.matches_queryset(league) if self.action == "log" else readmodel.summaries_queryset(league)
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
        return Response(profiles.player_profile(self.get_object()))


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
        return Response(profiles.referee_profile(self.get_object()))


class APIRoot(routers.APIRootView):
    """The Even/Odd League's read-only API: every league with its standings, schedule, matches
    (with the referees' message logs) and agents, as JSON (or CSV for standings and results).

    The interactive reference is at /api/docs/ (its OpenAPI schema at /api/schema/); the league
    pages themselves are at /. No key is needed: everything here is public.
    """

    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        response = super().get(request, *args, **kwargs)
        # The router's links first, then where to read about them and the way back to the site.
        response.data = {
            **response.data,
            "docs": reverse("api-docs", request=request),
            "schema": reverse("api-schema", request=request),
            "site": reverse("league-list", request=request),
        }
        return response
