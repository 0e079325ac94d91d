"""The ASGI application as the server loads it."""

from __future__ import annotations

import subprocess
import sys

from django.conf import settings


def test_the_urlconf_is_imported_when_the_application_loads_not_by_the_first_request():
    # A fresh interpreter: in the suite's own process the URLconf is long imported.
    code = (
        "import sys, leaguesite.asgi; "
        f"print({settings.ROOT_URLCONF!r} in sys.modules, 'rest_framework.serializers' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
        env={"DJANGO_SETTINGS_MODULE": "leaguesite.settings.production", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "True"]
