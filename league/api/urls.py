"""/api/: the read-only REST API, its OpenAPI schema and Swagger UI."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.routers import DefaultRouter

from league.api import views


class LeagueRouter(DefaultRouter):
    """DRF's router with a root that describes the API and links to its docs and the site."""

    APIRootView = views.APIRoot


router = LeagueRouter()
# "api-league", not "league": the page views own league-list and league-detail, and the API root
# linked "leagues" to the HTML home page while the two names clashed.
router.register("leagues", views.LeagueViewSet, basename="api-league")

LEAGUE = "leagues/<str:league_id>/"  # any stored id is served (the rule: league.models)
match_list = views.MatchViewSet.as_view({"get": "list"})
match_detail = views.MatchViewSet.as_view({"get": "retrieve"})
match_log = views.MatchViewSet.as_view({"get": "log"})
player_list = views.PlayerViewSet.as_view({"get": "list"})
player_detail = views.PlayerViewSet.as_view({"get": "retrieve"})
referee_list = views.RefereeViewSet.as_view({"get": "list"})
referee_detail = views.RefereeViewSet.as_view({"get": "retrieve"})

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves its start-up script as a file: the pages' Content-Security-Policy
    # refuses inline scripts.
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path(LEAGUE + "matches/", match_list, name="api-match-list"),
    path(LEAGUE + "matches/<str:match_id>/", match_detail, name="api-match-detail"),
    path(LEAGUE + "matches/<str:match_id>/log/", match_log, name="api-match-log"),
    path(LEAGUE + "players/", player_list, name="api-player-list"),
    path(LEAGUE + "players/<str:player_id>/", player_detail, name="api-player-detail"),
    path(LEAGUE + "referees/", referee_list, name="api-referee-list"),
    path(LEAGUE + "referees/<str:referee_id>/", referee_detail, name="api-referee-detail"),
    path("", include(router.urls)),
]
