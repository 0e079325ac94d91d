"""``/check/``: a student gives their agent's endpoint and gets the report of league/checkagent.py.

The check runs within the request: well under a second for a working agent; every wait is bounded
by the check's timeouts (about a minute in all for an agent slow to everything), and an agent that
does not answer its first message is sent nothing more.
Async, so a running check holds no worker thread while it waits on the agent. league.checkagent
(and the HTTP client and referee it brings) is imported on the first check, not with the URLconf:
every page's first request would otherwise pay for it.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import TYPE_CHECKING

from asgiref.sync import sync_to_async
from django import forms
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from referee.games import GAMES

if TYPE_CHECKING:
    from league.checkagent import Report

PROTOCOL_DOC = settings.BASE_DIR / "docs" / "protocol.md"


def heading_anchor(heading: str) -> str:
    """A heading's anchor as GitHub writes it (the fixes' ``docs/protocol.md#…`` links use them)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@cache
def protocol_html() -> str:
    """docs/protocol.md as HTML, each heading with its anchor as id (raw HTML in it is escaped)."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("js-default")
    tokens = md.parse(PROTOCOL_DOC.read_text(encoding="utf-8"))
    for opening, inline in zip(tokens, tokens[1:], strict=False):
        if opening.type == "heading_open":
            opening.attrSet("id", heading_anchor(inline.content))
    return md.renderer.render(tokens, md.options, {})


def protocol(request: HttpRequest) -> HttpResponse:
    """The protocol reference the check's fixes link into."""
    return render(request, "league/protocol.html", {"html": protocol_html()})


class CheckForm(forms.Form):
    endpoint = forms.CharField(
        label="Your agent's /mcp URL",
        max_length=500,
        widget=forms.TextInput(attrs={"placeholder": "http://192.168.1.23:8101/mcp", "autocomplete": "url"}),
    )
    game = forms.ChoiceField(label="Game", choices=[(name, name) for name in sorted(GAMES)], initial="even_odd")
    player_id = forms.RegexField(
        label="Call it as",
        regex=r"^[A-Za-z0-9_-]{1,32}$",
        required=False,
        widget=forms.TextInput(attrs={"placeholder": "automatic"}),
        help_text="empty: the id it is registered under here, else the one it answers with (P01 until it says)",
    )

    def clean_endpoint(self) -> str:
        return self.cleaned_data["endpoint"].strip()


def _rows(report: Report) -> list[dict]:
    from league.checkagent import reply_summary

    return [
        {
            "n": n,
            "step": step,
            "summary": reply_summary(step),
            "sent_json": json.dumps(step.sent, indent=2, ensure_ascii=False, default=str),
            "reply_json": json.dumps(step.reply, indent=2, ensure_ascii=False, default=str),
        }
        for n, step in enumerate(report.steps, 1)
    ]


async def check_agent(request: HttpRequest) -> HttpResponse:
    from league.checkagent import endpoint_refusal, find_registration, run_check, take_check_slot

    form = CheckForm(request.POST or None)
    context: dict = {"form": form, "per_minute": settings.CHECKAGENT_PER_MINUTE}
    status = 200
    if request.method == "POST" and form.is_valid():
        endpoint = form.cleaned_data["endpoint"]
        # Counted before anything else: a check (and the endpoint's name lookup) is the heavy part.
        wait = await take_check_slot(request.META.get("REMOTE_ADDR"))
        if wait is not None:
            status = 429
            context["refused"] = (
                f"Too many checks from your address (at most {settings.CHECKAGENT_PER_MINUTE} a minute): "
                f"try again in {wait} s."
            )
        elif problem := await sync_to_async(endpoint_refusal, thread_sensitive=False)(endpoint):
            status = 400
            form.add_error("endpoint", f"{problem}: the league would not call it either.")
        else:
            report = await run_check(
                endpoint,
                game_type=form.cleaned_data["game"],
                player_id=form.cleaned_data["player_id"] or None,
                registration=await sync_to_async(find_registration)(endpoint),
                referee_endpoint=request.build_absolute_uri("/mcp"),
            )
            context.update(report=report, rows=_rows(report), counts=report.counts())
    return render(request, "league/check.html", context, status=status)
