"""Admin: leagues with their workflow actions, agents, matches, results and the read-only event log.

State changes go through league/actions.py, so the admin leaves the same Event trail as the
command line and the LM. ``LeagueAdmin.actions`` is a list other modules may extend
(pause/resume/cancel) with ``LeagueAdmin.actions += [...]``.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from league import actions
from league.models import AgentStatus, Event, League, Match, MatchResult, Player, Referee, Round


def _each(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet, action, done: str) -> None:
    """Apply ``action`` to each selected object; report successes and refusals separately."""
    ok = 0
    for obj in queryset:
        try:
            action(obj)
            ok += 1
        except ValueError as exc:
            modeladmin.message_user(request, str(exc), messages.ERROR)
    if ok:
        modeladmin.message_user(request, f"{done}: {ok}", messages.SUCCESS)


@admin.action(description="Open registration (60 s window)")
def open_registration(modeladmin, request, queryset):
    _each(modeladmin, request, queryset, lambda league: actions.open_registration(league, 60), "Registration opened")


@admin.action(description="Close registration now")
def close_registration(modeladmin, request, queryset):
    _each(modeladmin, request, queryset, actions.close_registration, "Registration closed")


@admin.action(description="Start (close registration, mark READY)")
def start_league(modeladmin, request, queryset):
    _each(modeladmin, request, queryset, actions.start_league, "Started")


class PlayerInline(admin.TabularInline):
    model = Player
    fields = ("player_id", "display_name", "status", "endpoint", "registered_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False


class RefereeInline(PlayerInline):
    model = Referee
    fields = ("referee_id", "display_name", "status", "max_concurrent_matches", "endpoint", "registered_at")
    readonly_fields = fields


@admin.register(League)
class LeagueAdmin(admin.ModelAdmin):
    list_display = ("league_id", "name", "game_type", "status", "registration_closes_at", "current_round")
    list_filter = ("status", "game_type")
    search_fields = ("league_id", "name")
    readonly_fields = ("status", "current_round", "champion", "created_at", "started_at", "completed_at")
    actions = [open_registration, close_registration, start_league]
    inlines = [RefereeInline, PlayerInline]
    fieldsets = (
        (
            None,
            {"fields": ("league_id", "name", "game_type", "schedule_format", "status", "current_round", "champion")},
        ),
        (
            "Registration",
            {
                "fields": (
                    "registration_opens_at",
                    "registration_closes_at",
                    "min_players",
                    "max_players",
                    "max_referees",
                )
            },
        ),
        (
            "Timeouts and retries (seconds)",
            {
                "fields": (
                    "join_timeout",
                    "move_timeout",
                    "game_over_timeout",
                    "report_timeout",
                    "default_timeout",
                    "retries",
                    "retry_delay",
                    "max_invalid_moves",
                    "match_deadline",
                )
            },
        ),
        ("Agents", {"fields": ("embedded_referee", "allowed_networks", "rate_limit_per_minute")}),
        ("History", {"fields": ("created_at", "started_at", "completed_at")}),
    )


def _agent_status_action(status: str, description: str):
    @admin.action(description=description)
    def act(modeladmin, request, queryset):
        _each(modeladmin, request, queryset, lambda agent: actions.set_agent_status(agent, status), description)

    act.__name__ = f"mark_{status.lower()}"
    return act


@admin.action(description="Revoke token (stops working at once; suspends)")
def revoke_token(modeladmin, request, queryset):
    _each(modeladmin, request, queryset, actions.revoke_agent, "Token revoked")


class AgentAdmin(admin.ModelAdmin):
    list_filter = ("league", "status")
    readonly_fields = ("token_hash", "registered_at", "last_seen_at", "failures")
    actions = [
        _agent_status_action(AgentStatus.SUSPENDED, "Suspend"),
        _agent_status_action(AgentStatus.REMOVED, "Remove from the league"),
        revoke_token,
    ]


@admin.register(Player)
class PlayerAdmin(AgentAdmin):
    list_display = ("player_id", "display_name", "league", "status", "endpoint", "last_seen_at")
    search_fields = ("player_id", "display_name", "endpoint")


@admin.register(Referee)
class RefereeAdmin(AgentAdmin):
    list_display = ("referee_id", "display_name", "league", "status", "max_concurrent_matches", "endpoint")
    search_fields = ("referee_id", "display_name", "endpoint")


@admin.register(Round)
class RoundAdmin(admin.ModelAdmin):
    list_display = ("league", "number", "status", "announced_at", "completed_at")
    list_filter = ("league", "status")


@admin.register(Match)
class MatchAdmin(admin.ModelAdmin):
    list_display = ("match_id", "league", "player_a", "player_b", "status", "referee", "attempt", "finished_at")
    list_filter = ("league", "status", "game_type")
    search_fields = ("match_id",)
    list_select_related = ("league", "player_a", "player_b", "referee")


@admin.register(MatchResult)
class MatchResultAdmin(admin.ModelAdmin):
    list_display = ("match", "league", "outcome", "winner", "points_a", "points_b", "referee", "reported_at")
    list_filter = ("league", "outcome")
    readonly_fields = ("report_digest", "reported_at")


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    """The append-only log: browse and search, never add, change or delete."""

    list_display = ("at", "league", "direction", "kind", "agent", "match_id")
    list_filter = ("direction", "league")
    search_fields = ("kind", "agent", "match_id")
    date_hierarchy = "at"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
