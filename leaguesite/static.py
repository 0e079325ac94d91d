"""``/static/``: the files of ``STATICFILES_DIRS`` and of each app's ``static/`` folder (what
Django's default finders find), served by WhiteNoise.

WhiteNoise is a WSGI application; asgiref's ``WsgiToAsgi`` runs it for the requests under
``STATIC_URL`` only (leaguesite/asgi.py), so the Django middleware stack every other request goes
through stays asynchronous (WhiteNoise's Django middleware is synchronous only: a thread hop on
every ``/mcp`` call).
"""

from __future__ import annotations

from pathlib import Path

from asgiref.wsgi import WsgiToAsgi
from django.apps import apps
from django.conf import settings
from whitenoise import WhiteNoise


def _not_found(environ: dict, start_response) -> list[bytes]:  # noqa: ANN001 (WSGI)
    start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
    return [b"Not found\n"]


def _nosniff(headers, path: str, url: str) -> None:  # noqa: ANN001 (WhiteNoise's Headers)
    # What Django's SecurityMiddleware sends with every page, for the files too.
    headers["X-Content-Type-Options"] = "nosniff"


def static_folders() -> list[Path]:
    """The folders served, in the finders' order: the first one holding a path serves it."""
    folders = [Path(folder) for folder in settings.STATICFILES_DIRS]
    folders += [Path(app.path) / "static" for app in apps.get_app_configs()]
    return [folder for folder in folders if folder.is_dir()]


def static_prefix() -> str:
    """The path every static file's URL starts with (``STATIC_URL``, a path on this site)."""
    return "/" + settings.STATIC_URL.strip("/") + "/"


def static_files() -> WsgiToAsgi:
    """An ASGI app serving ``static_prefix()`` from ``static_folders()``; anything else is 404."""
    prefix = static_prefix()
    app = WhiteNoise(_not_found, autorefresh=settings.DEBUG, add_headers_function=_nosniff)
    for folder in reversed(static_folders()):  # a later add_files wins: the first folder last
        app.add_files(folder, prefix=prefix)
    return WsgiToAsgi(app)
