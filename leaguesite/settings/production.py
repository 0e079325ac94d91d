"""Settings of the League Manager as an organiser runs it (``manage.py`` and leaguesite/asgi.py
default to these): the shared settings, and the deployment switches read from the environment.
With the checklist of docs/operations.md set, ``manage.py check --deploy`` reports no issues."""

from leaguesite.env import env_bool, env_int
from leaguesite.settings.base import *  # noqa: F403

SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", False)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
# Behind a TLS-terminating proxy that sets X-Forwarded-Proto (only then: the header is trusted).
if env_bool("SECURE_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", SECURE_HSTS_SECONDS > 0)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", SECURE_HSTS_SECONDS > 0)
