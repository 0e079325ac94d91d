"""Admin: leagues with their workflow actions, agents, matches, results and the read-only event log.

State changes go through league/actions/, so the admin leaves the same Event trail as the
command line and the LM. Actions that cannot be undone (cancel) ask for confirmation on a page of
their own, as Django's delete does.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, reverse

from league import actions
from league.actions.arena import open_arena as open_arena_action
from league.api.readmodel import referee_warning
from league.conductor.delivery_log import BATCH_AGENT
from league.events import announce_leagues
from league.export import dumps, export_league
from league.models import (
    AgentStatus,
    Arena,
    ArenaSeat,
    Event,
    League,
    Match,
    MatchResult,
    Player,
    Rating,
    RatingChange,
    Referee,
    Round,
)


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


class RegistrationWindowForm(forms.Form):
    minutes = forms.FloatField(
        required=False,
        min_value=0.1,
        initial=10,
        label="Keep registration open for (minutes)",
        help_text="Leave empty to keep it open until you close it or start the league.",
    )


@admin.action(description="Open registration…")
def open_registration(modeladmin, request, queryset):
    """Asks how long the window stays open (a page of its own), then opens it."""
    form = RegistrationWindowForm(request.POST if "apply" in request.POST else None)
    if "apply" in request.POST and form.is_valid():
        minutes = form.cleaned_data["minutes"]
        seconds = minutes * 60 if minutes else None
        _each(
            modeladmin,
            request,
            queryset,
            lambda league: actions.open_registration(league, seconds),
            "Registration opened",
        )
        return None
    return TemplateResponse(
        request,
        "admin/league/open_registration.html",
        {
            **modeladmin.admin_site.each_context(request),
            "title": "Open registration",
            "form": form,
            "leagues": queryset,
            "opts": modeladmin.model._meta,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        },
    )


@admin.action(description="Close registration now")
def close_registration(modeladmin, request, queryset):
    _each(modeladmin, request, queryset, actions.close_registration, "Registration closed")


@admin.action(description="Start (close registration, mark READY)")
def start_league(modeladmin, request, queryset):
    _each(modeladmin, request, queryset, actions.start_league, "Started")
    started = False
    for league in queryset.model.objects.filter(pk__in=[league.pk for league in queryset]):
        started = started or league.status in actions.IN_PLAY
        warning = referee_warning(league)
        if warning:
            modeladmin.message_user(request, f"League {league.league_id}: {warning}", messages.WARNING)
    if started:
        # The admin only marks a league READY: without a conductor it stays there, saying nothing.
        modeladmin.message_user(
            request,
            "The conductor (python manage.py runleague, running beside the site) draws the schedule and plays"
            " the rounds.",
            messages.INFO,
        )


@admin.action(description="Generate a referee key (shown once; replaces the previous one)")
def generate_referee_key(modeladmin, request, queryset):
    """The new keys on a page of their own, never in a message: messages may sit in a cookie."""
    keys = [(league, actions.generate_referee_key(league)) for league in queryset]
    # The URL the teacher reached the admin by is the one a referee on this network can use too.
    league_url = f"{settings.LM_BASE_URL}/mcp" if settings.LM_BASE_URL else request.build_absolute_uri("/mcp")
    response = TemplateResponse(
        request,
        "admin/league/referee_keys.html",
        {
            **modeladmin.admin_site.each_context(request),
            "title": "Referee keys",
            "keys": keys,
            "league_url": league_url,
        },
    )
    response["Cache-Control"] = "no-store"  # the page holds secrets: no copy in any cache
    return response


@admin.action(description="Revoke the referee key")
def revoke_referee_key(modeladmin, request, queryset):
    _each(modeladmin, request, queryset, actions.revoke_referee_key, "Referee key revoked")


@admin.action(description="Open the arena (plays at once, takes players while it runs)")
def open_arena(modeladmin, request, queryset):
    _each(modeladmin, request, queryset, open_arena_action, "Arena open")


@admin.action(description="Pause")
def pause(modeladmin, request, queryset):
    _each(modeladmin, request, queryset, actions.pause_league, "Paused")


@admin.action(description="Resume")
def resume(modeladmin, request, queryset):
    _each(modeladmin, request, queryset, actions.resume_league, "Resumed")


@admin.action(description="Cancel the league…")
def cancel(modeladmin, request, queryset):
    """Asks first (a page of its own): a cancelled league cannot be resumed."""
    if "apply" in request.POST:
        _each(modeladmin, request, queryset, actions.cancel_league, "Cancelled")
        return None
    return TemplateResponse(
        request,
        "admin/league/confirm_cancel.html",
        {
            **modeladmin.admin_site.each_context(request),
            "title": "Cancel the league?",
            "leagues": queryset,
            "opts": modeladmin.model._meta,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        },
    )


@admin.action(description="Export as JSON (a full backup, as `league export` writes it)")
def export_json(modeladmin, request, queryset):
    """The backup a teacher keeps, downloaded from the admin (one league at a time: one file)."""
    if queryset.count() != 1:
        modeladmin.message_user(request, "Select one league to export (one file each).", messages.ERROR)
        return None
    league = queryset.get()
    response = HttpResponse(dumps(export_league(league)), content_type="application/json; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{league.league_id}-export.json"'
    return response


@admin.action(description="Reinstate (undo suspension)")
def reinstate(modeladmin, request, queryset):
    _each(modeladmin, request, queryset, actions.reinstate_agent, "Reinstated")


class PlayerInline(admin.TabularInline):
    model = Player
    fields = ("player_id", "display_name", "status", "endpoint", "registered_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False


class ArenaInline(admin.StackedInline):
    """An arena's settings (league.models.Arena), on its league's page."""

    model = Arena
    fields = ("max_matches_per_hour", "house_prefix", "rest_base", "rest_max", "matches_created")
    readonly_fields = ("matches_created",)
    can_delete = False
    extra = 0


class ArenaSeatInline(admin.TabularInline):
    """Who is in the arena: each player's identity, whether a house bot, and its rest."""

    model = ArenaSeat
    fk_name = "league"
    fields = ("player", "identity", "house", "failures", "rested_until")
    readonly_fields = ("player", "identity", "failures", "rested_until")
    extra = 0
    can_delete = False
    verbose_name_plural = "arena seats (who is playing)"

    def has_add_permission(self, request, obj=None):
        return False


class RefereeInline(PlayerInline):
    model = Referee
    fields = ("referee_id", "display_name", "status", "max_concurrent_matches", "endpoint", "registered_at")
    readonly_fields = fields


@admin.register(League)
class LeagueAdmin(admin.ModelAdmin):
    """Leagues. Adding one goes through ``actions.create_league`` (the path the ``league`` command
    takes); deleting one through ``actions.delete_league``, which may remove its events."""

    list_display = ("league_id", "name", "game_type", "status", "registration_closes_at", "current_round", "page")
    list_filter = ("status", "game_type")
    search_fields = ("league_id", "name")
    readonly_fields = (
        "status",
        "current_round",
        "champion",
        "created_at",
        "started_at",
        "completed_at",
        "referee_key",
    )
    actions = [
        open_registration,
        close_registration,
        start_league,
        open_arena,
        pause,
        resume,
        cancel,
        generate_referee_key,
        revoke_referee_key,
        export_json,
    ]
    inlines = [RefereeInline, PlayerInline]

    def get_inlines(self, request: HttpRequest, obj: League | None) -> list:
        # An arena's settings and seats, on an arena only.
        if obj is not None and obj.is_arena:
            return [ArenaInline, ArenaSeatInline, *self.inlines]
        return self.inlines

    fieldsets = (
        (
            None,
            {
                "fields": (
                    "league_id",
                    "name",
                    "game_type",
                    "schedule_format",
                    "swiss_rounds",
                    "status",
                    "current_round",
                    "champion",
                )
            },
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
                    # A class that follows the league live on a projector wants time between rounds.
                    "round_pause",
                )
            },
        ),
        (
            "Agents",
            {
                "fields": (
                    "embedded_referee",
                    "allowed_networks",
                    "max_seats_per_network",
                    "rate_limit_per_minute",
                    "referee_key",
                )
            },
        ),
        ("History", {"fields": ("created_at", "started_at", "completed_at")}),
    )

    def view_on_site(self, obj: League) -> str | None:
        """The "View on site" link: the league's public page (an arena's leaderboard)."""
        try:
            return reverse("arena-detail" if obj.is_arena else "league-detail", args=[obj.league_id])
        except NoReverseMatch:
            return None

    @admin.display(description="referee key")
    def referee_key(self, obj: League) -> str:
        # Whether one is set, never the key (only its hash is stored).
        if obj.referee_key_hash:
            return "set (generate again to rotate it, or revoke it, with the actions of the league list)"
        return "none (referees need the site's REFEREE_KEY)"

    @admin.display(description="public page")
    def page(self, obj: League):
        from django.utils.html import format_html

        url = self.view_on_site(obj)
        return format_html('<a href="{}">view</a>', url) if url else "–"

    def get_readonly_fields(self, request: HttpRequest, obj: League | None = None) -> tuple[str, ...]:
        # Agents know a league by its id: once it exists, the id stays.
        return (*self.readonly_fields, "league_id") if obj is not None else self.readonly_fields

    def save_model(self, request: HttpRequest, obj: League, form: forms.ModelForm, change: bool) -> None:
        if change:
            with transaction.atomic():
                super().save_model(request, obj, form, change)
                League.objects.filter(pk=obj.pk).changed()  # after the save, which wrote the version it read
            return
        settings: dict[str, Any] = {
            name: form.cleaned_data[name]
            for name in form.cleaned_data
            if name not in ("league_id", "name", "game_type") and name in {f.name for f in League._meta.fields}
        }
        league = actions.create_league(name=obj.name, league_id=obj.league_id, game_type=obj.game_type, **settings)
        announce_leagues("league_created", league.league_id)
        # The admin goes on with ``obj`` (its log entry, the redirect): make it the saved row.
        obj.pk = league.pk
        obj.refresh_from_db()

    # -- deleting: one named, logged action removes the league with all its records --------
    def get_deleted_objects(self, objs, request: HttpRequest):
        summary, counts, protected = [], {}, []
        for league in objs:
            if league.status in actions.IN_PLAY:
                protected.append(f"{league} is {league.status}: cancel it first")
                continue
            records = actions.league_records(league)
            summary.append(f"{league}: " + ", ".join(f"{n} {kind}" for kind, n in records.items()))
            for kind, n in records.items():
                counts[kind] = counts.get(kind, 0) + n
        counts["leagues"] = len(summary)
        return summary, counts, set(), protected

    def delete_model(self, request: HttpRequest, obj: League) -> None:
        actions.delete_league(obj, by=request.user.get_username())

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        for league in queryset:
            self.delete_model(request, league)


def _agent_status_action(status: str, description: str):
    @admin.action(description=description)
    def act(modeladmin, request, queryset):
        _each(modeladmin, request, queryset, lambda agent: actions.set_agent_status(agent, status), description)

    act.__name__ = f"mark_{status.lower()}"
    return act


@admin.action(description="Revoke token (stops working at once; suspends)")
def revoke_token(modeladmin, request, queryset):
    _each(modeladmin, request, queryset, actions.revoke_agent, "Token revoked")


class ChangesItsLeague(admin.ModelAdmin):
    """The admin of rows a league's standings read (agents, rounds, results): saving or deleting
    one moves its league's version on, in the same transaction, so the change shows at once."""

    def save_model(self, request: HttpRequest, obj: Any, form: forms.ModelForm, change: bool) -> None:
        with transaction.atomic():
            super().save_model(request, obj, form, change)
            League.objects.filter(pk=obj.league_id).changed()

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        league_pk = obj.league_id
        with transaction.atomic():
            super().delete_model(request, obj)
            League.objects.filter(pk=league_pk).changed()

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        league_pks = set(queryset.values_list("league_id", flat=True))
        with transaction.atomic():
            super().delete_queryset(request, queryset)
            League.objects.filter(pk__in=league_pks).changed()


class AgentAdmin(ChangesItsLeague):
    list_filter = ("league", "status")
    readonly_fields = ("token_hash", "registered_at", "last_seen_at", "failures")
    actions = [
        _agent_status_action(AgentStatus.SUSPENDED, "Suspend"),
        _agent_status_action(AgentStatus.REMOVED, "Remove from the league"),
        revoke_token,
        reinstate,
    ]


@admin.register(Player)
class PlayerAdmin(AgentAdmin):
    list_display = ("player_id", "display_name", "league", "status", "endpoint", "last_seen_at")
    search_fields = ("player_id", "display_name", "endpoint")


@admin.register(Referee)
class RefereeAdmin(AgentAdmin):
    list_display = ("referee_id", "display_name", "league", "status", "max_concurrent_matches", "endpoint")
    search_fields = ("referee_id", "display_name", "endpoint")


@admin.register(Rating)
class RatingAdmin(admin.ModelAdmin):
    """Ratings across arenas (league/ratings.py): read-only, moved only by rated matches."""

    list_display = ("display_name", "identity", "game_type", "ordinal", "mu", "sigma", "matches", "updated_at")
    list_filter = ("game_type",)
    search_fields = ("display_name", "identity")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(RatingChange)
class RatingChangeAdmin(RatingAdmin):
    list_display = ("at", "league", "match", "player", "result", "technical", "opponent", "ordinal", "sigma")
    list_filter = ("league", "result")
    search_fields = ("player__display_name", "opponent")
    list_select_related = ("league", "match", "player")


@admin.register(Round)
class RoundAdmin(ChangesItsLeague):
    list_display = ("league", "number", "status", "announced_at", "completed_at")
    list_filter = ("league", "status")


@admin.register(Match)
class MatchAdmin(admin.ModelAdmin):
    list_display = ("match_id", "league", "player_a", "player_b", "status", "referee", "attempt", "finished_at")
    list_filter = ("league", "status", "game_type")
    search_fields = ("match_id",)
    list_select_related = ("league", "player_a", "player_b", "referee")


@admin.register(MatchResult)
class MatchResultAdmin(ChangesItsLeague):
    list_display = ("match", "league", "outcome", "winner", "points_a", "points_b", "referee", "reported_at")
    list_filter = ("league", "outcome")
    readonly_fields = ("report_digest", "reported_at")


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    """The append-only log: browse and search, never add, change or delete."""

    list_display = ("at", "league", "direction", "kind", "sent_to", "match_id")
    list_filter = ("direction", "league")
    search_fields = ("kind", "agent", "match_id")
    date_hierarchy = "at"

    @admin.display(description="agent", ordering="agent")
    def sent_to(self, event: Event) -> str:
        """The agent, or for a notice sent to several at once (league/conductor/delivery_log.py)
        how many and the first few: their outcomes are in the row's payload."""
        to = event.payload.get("to") if isinstance(event.payload, dict) else None
        if event.agent or not isinstance(to, dict):
            return event.agent
        names = list(to)
        more = f" … ({len(names)} agents)" if len(names) > 3 else ""
        return ", ".join(names[:3]) + more

    def get_search_results(self, request, queryset, search_term):
        """An agent's id also finds the notices sent to it with others (one row for all, the
        agent among the keys of its ``to``): what was P07 told is one search."""
        found, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        term = search_term.strip()
        if term and " " not in term:
            found |= queryset.filter(agent=BATCH_AGENT, payload__to__has_key=term)
        return found, may_have_duplicates

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
