"""Public pages of the dashboard (their static files: leaguesite/static.py)."""

from django.urls import path

from league.pages import check, views

# <str:league_id>, not <slug:>: a league stored before ids were checked still has a page (the
# rule for new ids is league.models.LEAGUE_ID_PATTERN). The league page's two addresses are routed
# beside Django's views too (league/pages/endpoint.py), which answer what that route leaves.
LEAGUE_PAGE = "leagues/<str:league_id>/"
ARENA_PAGE = "arenas/<str:league_id>/"
urlpatterns = [
    path("", views.league_list, name="league-list"),
    path("check/", check.check_agent, name="check-agent"),
    path("check/protocol/", check.protocol, name="check-protocol"),
    path(LEAGUE_PAGE, views.league_detail, name="league-detail"),
    # An arena is a league: the same view, which renders its leaderboard.
    path(ARENA_PAGE, views.league_detail, name="arena-detail"),
    path("leagues/<str:league_id>/matches/<str:match_id>/", views.match_detail, name="match-detail"),
    path("leagues/<str:league_id>/players/<str:player_id>/", views.player_detail, name="player-detail"),
    path("leagues/<str:league_id>/referees/<str:referee_id>/", views.referee_detail, name="referee-detail"),
]
