"""/static/ through the site's ASGI app (leaguesite/static.py: WhiteNoise over the finders' folders)."""

from __future__ import annotations

import httpx


def test_it_serves_the_sites_and_the_apps_static_files(lm_server):
    base = lm_server.removesuffix("/mcp")
    script = httpx.get(f"{base}/static/league/league.js", timeout=10)
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert script.headers["x-content-type-options"] == "nosniff"
    assert httpx.get(f"{base}/static/vendor/chart.umd.min.js", timeout=10).status_code == 200
    # An app's own static folder (the admin's), as Django's finders would find it.
    assert httpx.get(f"{base}/static/admin/css/base.css", timeout=10).status_code == 200


def test_anything_else_under_static_is_not_found(lm_server):
    base = lm_server.removesuffix("/mcp")
    for path in ("/static/league/nope.js", "/static/../manage.py", "/static/%2e%2e/manage.py", "/static/"):
        assert httpx.get(base + path, timeout=10).status_code == 404, path
    # Pages are still the site's.
    assert httpx.get(f"{base}/", timeout=10).status_code == 200
