"""Settings every League Manager process shares, read from environment variables
(leaguesite/settings/production.py and test.py build on them; docs/operations.md lists them).

Embedded default: SQLite file + in-memory channel layer, so a fresh checkout just runs.
``DATABASE_URL`` and ``REDIS_URL`` switch to PostgreSQL and Redis.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from leaguesite.env import env_bool, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent.parent

DEBUG = env_bool("DEBUG", False)


def _secret_key() -> str:
    """SECRET_KEY from the environment, else a random key kept in a local untracked file."""
    key = env_str("SECRET_KEY")
    if key:
        if len(key) < 32:
            raise ImproperlyConfigured("SECRET_KEY must be at least 32 characters")
        return key
    path = Path(env_str("SECRET_KEY_FILE", str(BASE_DIR / ".secret_key")))
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    # First: its runserver (loopback only) is daphne's, imported by that command alone. daphne is
    # not an app here: its app imports the Twisted server into every process at start-up (~0.5 s
    # of CPU for each agent, conductor and command), and only runserver uses it.
    "leaguesite",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "league",
    "referee",
    "players",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
]

ROOT_URLCONF = "leaguesite.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

ASGI_APPLICATION = "leaguesite.asgi.application"

# -- database -----------------------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL") or f"sqlite:///{BASE_DIR / 'db.sqlite3'}"
# CONN_MAX_AGE stays 0: under ASGI each request to a Django view runs its sync code in a thread of
# its own, whose connection would otherwise outlive it. /mcp's database thread keeps its one
# connection and replaces it after an outage (league/mcp/database.py).
# How long a SQLite writer waits for the file's lock before "database is locked" (an outage the LM
# and the conductor ride out), in seconds.
SQLITE_BUSY_TIMEOUT = 30


def sqlite_options(busy_timeout: int) -> dict[str, object]:
    """Several processes (LM, conductor) share the file: WAL lets readers run beside the writer,
    IMMEDIATE transactions take the write lock up front so none deadlocks on upgrade."""
    return {
        "init_command": (
            f"PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout={busy_timeout * 1000};"
        ),
        "transaction_mode": "IMMEDIATE",
        "timeout": busy_timeout,
    }


DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=0, conn_health_checks=True)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["OPTIONS"] = sqlite_options(SQLITE_BUSY_TIMEOUT)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# -- channels -----------------------------------------------------------------------------
REDIS_URL = env_str("REDIS_URL")
# What this site keeps in Redis (channel layer, rate limits, cache) is under REDIS_PREFIX, so that
# several sites can share one server.
REDIS_PREFIX = env_str("REDIS_PREFIX", "")
# Calls in flight to one relay agent at once; one more is answered 503 without reaching the agent.
RELAY_MAX_IN_FLIGHT = env_int("RELAY_MAX_IN_FLIGHT", 32)
# The messages bound for one LM process that may wait in Redis (channels_redis's `capacity`):
# a league's events for the process whose audience leads the league's pages, and the pushes for
# the others' (league/consumers.py). A burst of results is far less; past it a group's message is
# dropped for that process.
CHANNEL_CAPACITY = 8000


def redis_channel_layer(url: str, prefix: str) -> dict[str, object]:
    """The site's channel layer on the Redis server at ``url``, its keys under ``prefix``."""
    return {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            # A process waits for its messages in Redis reads that block up to 5 s (channels_redis's
            # brpop_timeout). redis-py gives up on a read after socket_timeout, by default also
            # 5 s: a wait that ends empty would raise TimeoutError instead. (A socket_timeout in
            # the URL's query string overrides this one.)
            "hosts": [{"address": url, "socket_timeout": 15}],
            "prefix": prefix,
            "capacity": CHANNEL_CAPACITY,
        },
    }


def relay_channel_layer(url: str, prefix: str) -> dict[str, object]:
    """The relay's channel layer on the Redis server at ``url`` (league/relay/layer.py says why
    pub/sub): its channels are Redis pub/sub channels under ``prefix``."""
    return {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {"hosts": [{"address": url}], "prefix": prefix},
    }


def channel_layers(redis_url: str | None, prefix: str) -> dict[str, object]:
    if redis_url:
        return {
            "default": redis_channel_layer(redis_url, f"{prefix}asgi"),
            "relay": relay_channel_layer(redis_url, f"{prefix}relay:"),
        }
    return {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


CHANNEL_LAYERS = channel_layers(REDIS_URL, REDIS_PREFIX)


def caches(redis_url: str | None, prefix: str) -> dict[str, object]:
    """Django's cache: where a league's snapshot and rendered page are kept once per version for
    every reader (league/api/live.py, league/pages/views.py). With Redis, in Redis, so that
    several LM processes build each version once between them; else in the process's memory."""
    if redis_url:
        return {
            "default": {
                "BACKEND": "django.core.cache.backends.redis.RedisCache",
                "LOCATION": redis_url,
                "KEY_PREFIX": f"{prefix}cache",
            }
        }
    return {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}


CACHES = caches(REDIS_URL, REDIS_PREFIX)

# -- auth, i18n, static ---------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"
# The site serves /static/ itself (leaguesite/static.py: WhiteNoise, from the apps' and
# STATICFILES_DIRS' files; no collectstatic step before `make demo` or a class).
LOGIN_URL = "admin:login"

# -- security (see `manage.py check --deploy` and docs/operations.md) -----------------------------
# The deployment switches (TLS redirect, secure cookies, HSTS) are in production.py.
SESSION_COOKIE_HTTPONLY = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy of every page: scripts, styles, images and connections (the dashboard's
# websocket: 'self' covers ws:// and wss:// to the same host) only from the site itself. Inline
# style attributes stay allowed: the pages draw progress bars with style="width: …" (also when
# site.js swaps a page's content in); inline scripts and every other origin are refused.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF, CSP.UNSAFE_INLINE],
    "img-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}
# Large enough for admin forms; /mcp enforces its own, smaller limit.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 2_621_440)
# Every request (leaguesite/limits.py): a body over the limit gets 413 before it is read
# (MCP_MAX_BODY_BYTES on /mcp, this elsewhere), and a body not whole within REQUEST_READ_TIMEOUT
# seconds of the end of its headers gets 408.
SITE_MAX_BODY_BYTES = env_int("SITE_MAX_BODY_BYTES", DATA_UPLOAD_MAX_MEMORY_SIZE)
REQUEST_READ_TIMEOUT = env_int("REQUEST_READ_TIMEOUT", 30)

# -- REST API -------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "league.api.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Even/Odd League API",
    "DESCRIPTION": "Read-only access to leagues, standings, schedules, matches and agents.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Every endpoint is public and read-only: no security scheme, so the docs show no locks
    # (the session login DRF adds is only for the browsable API).
    "AUTHENTICATION_WHITELIST": [],
    # Swagger UI and Redoc assets come from drf-spectacular-sidecar: no CDN at run time.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "league.api.schema_hooks.document_not_found",
    ],
    "ENUM_NAME_OVERRIDES": {
        "LeagueStatusEnum": "league.models.League.Status",
        "AgentStatusEnum": "league.models.AgentStatus",
        "MatchStatusEnum": "league.models.Match.Status",
        "ResultStatusEnum": ["WIN", "DRAW", "TECHNICAL_LOSS"],
    },
}

# -- the league ------------------------------------------------------------------------------
# Request limits on the LM's /mcp endpoint. 1 MiB holds a referee's batch of ~100 reports with
# their match logs (referee/agent.py: REPORT_BATCH_BYTES): fewer, larger POSTs cost the LM less.
MCP_MAX_BODY_BYTES = env_int("MCP_MAX_BODY_BYTES", 1024 * 1024)
MCP_ALLOWED_ORIGINS = env_list("MCP_ALLOWED_ORIGINS", [])
# A JSON-RPC batch holds at most this many items (a referee's batch of reports: 50); a reply body
# (one response, or a batch's together) at most this many bytes: the largest single answer, a
# played 200-player double round-robin's schedule (39,800 matches), is about 9 MB, 21 MB through
# tools/call (as text and as structuredContent).
MCP_MAX_BATCH_ITEMS = env_int("MCP_MAX_BATCH_ITEMS", 100)
MCP_MAX_REPLY_BYTES = env_int("MCP_MAX_REPLY_BYTES", 32 * 1024 * 1024)
# Rate limits (league/ratelimit.py): per token and per client address, per minute. A league's
# own rate_limit_per_minute applies to messages naming it; referees' tokens get REFEREE_FACTOR
# times that, an address ADDRESS_FACTOR times that; messages naming no league use the site-wide
# values. Sized so a 100-player league's referees (~100 reports/s) never meet them.
MCP_RATE_LIMIT_ENABLED = env_bool("MCP_RATE_LIMIT_ENABLED", True)
MCP_RATE_LIMIT_PER_TOKEN = env_int("MCP_RATE_LIMIT_PER_TOKEN", 600)
MCP_RATE_LIMIT_PER_ADDRESS = env_int("MCP_RATE_LIMIT_PER_ADDRESS", 12_000)
MCP_RATE_LIMIT_REFEREE_FACTOR = env_int("MCP_RATE_LIMIT_REFEREE_FACTOR", 20)
MCP_RATE_LIMIT_ADDRESS_FACTOR = env_int("MCP_RATE_LIMIT_ADDRESS_FACTOR", 20)
MCP_RATE_LIMIT_PREFIX = env_str("MCP_RATE_LIMIT_PREFIX", f"{REDIS_PREFIX}league:rl:")
# Registrations' own limits: this many per window (seconds) per client address and per league, so
# one machine cannot fill a league with agents. The LM's own machine (demo, bench, the organiser's
# referees) is exempt; behind a reverse proxy every client shares its address: see docs/operations.md.
REGISTRATION_RATE_PER_ADDRESS = env_int("REGISTRATION_RATE_PER_ADDRESS", 10)
REGISTRATION_RATE_PER_ADDRESS_WINDOW = env_int("REGISTRATION_RATE_PER_ADDRESS_WINDOW", 60)
# Per network (a /24 of IPv4, a /64 of IPv6) over the address's window: a class behind one NAT is
# one address anyway; this stops one host rotating through its addresses.
REGISTRATION_RATE_PER_NETWORK = env_int("REGISTRATION_RATE_PER_NETWORK", 30)
REGISTRATION_RATE_PER_LEAGUE = env_int("REGISTRATION_RATE_PER_LEAGUE", 100)
REGISTRATION_RATE_PER_LEAGUE_WINDOW = env_int("REGISTRATION_RATE_PER_LEAGUE_WINDOW", 60)
REGISTRATION_RATE_EXEMPT_NETWORKS = env_list("REGISTRATION_RATE_EXEMPT_NETWORKS", ["127.0.0.0/8", "::1/128"])
# Agent endpoints (league/endpoints.py): the well-known ports of other services (databases,
# brokers, SSH, mail) are refused unless this is on.
ENDPOINT_ALLOW_SERVICE_PORTS = env_bool("ENDPOINT_ALLOW_SERVICE_PORTS", False)
# "Check my agent" (/check/, league/checkagent.py): checks a minute per client address (each plays a
# practice match, seconds of work), and the networks a checked endpoint may be in (empty: the
# leagues' default, league.models.DEFAULT_ALLOWED_NETWORKS).
CHECKAGENT_PER_MINUTE = env_int("CHECKAGENT_PER_MINUTE", 3)
CHECKAGENT_ALLOWED_NETWORKS = env_str("CHECKAGENT_ALLOWED_NETWORKS", "")
# The largest payload one Event row stores (bytes of JSON); larger ones are summarised.
EVENT_PAYLOAD_MAX_BYTES = env_int("EVENT_PAYLOAD_MAX_BYTES", 32 * 1024)
# The site-wide referee key: register_referee is accepted only with it or with the league's own
# key (generated in the admin). Neither set: no referee can register (docs/operations.md).
REFEREE_KEY = env_str("REFEREE_KEY", "") or ""

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "WARNING")},
}

# -- the relay (league/relay/, docs/protocol.md "Playing from behind NAT") ---------------------
# Players registered with contact_endpoint "connect" keep a WebSocket open to /agents/connect and
# are called at <LM_BASE_URL>/relay/<league_id>/<player_id>/mcp. Unset: the scheme and Host of
# the registration request (set it when the LM sits behind a proxy or has a public name).
LM_BASE_URL = env_str("LM_BASE_URL", "").rstrip("/")
# The largest message either way (a relayed call's body, an agent's reply frame), in bytes.
RELAY_MAX_MESSAGE_BYTES = env_int("RELAY_MAX_MESSAGE_BYTES", 256 * 1024)
# Frames an agent may send per minute (a burst of a tenth of that), and socket opens per
# address per minute; over either, the socket is closed (4429).
RELAY_FRAMES_PER_MINUTE = env_int("RELAY_FRAMES_PER_MINUTE", 6000)
RELAY_CONNECTS_PER_MINUTE = env_int("RELAY_CONNECTS_PER_MINUTE", 120)
# How long a relayed call waits for its reply when the call names no deadline of its own.
RELAY_CALL_TIMEOUT = env_int("RELAY_CALL_TIMEOUT", 30)
# A call to an agent whose socket is down waits this long for it to reconnect, then is 502. By
# default as long as a call may wait: to the caller the agent is a host that does not answer.
RELAY_RECONNECT_WAIT = env_int("RELAY_RECONNECT_WAIT", 30)
# Seconds an agent has to send its token after opening the socket.
RELAY_HELLO_TIMEOUT = env_int("RELAY_HELLO_TIMEOUT", 10)

# -- operational tunables (docs/operations.md, "Tunables") -------------------------------------
# Seconds between the conductor's passes (`runleague --poll`): how soon a round's end is seen.
CONDUCTOR_POLL = 0.01
# Seconds the standings of a league (league/standings.py) and the results its page's tables read
# (league/api/readmodel.py, played) are served from memory, brought up to date from the results
# added since, before one full read: results are appended, never changed, so only an admin edit
# waits this.
STANDINGS_CACHE_TTL = 5.0
# Seconds a league's rate_limit_per_minute is kept in memory (league/ratelimit.py) before it is
# read again: an admin's change applies within this.
LEAGUE_RATE_LIMIT_CACHE_TTL = 5.0
# A relayed call to a socket this process holds goes straight to its consumer (league/relay/hub.py).
# False sends every call through the channel layer, the path calls from other LM processes take:
# use it to check a Redis layer on one process.
RELAY_LOCAL_SHORTCUT = True
# A league page lists every match of a schedule up to this many (a 35-player round-robin has 595);
# past it, the matches of the rounds in play, of the last completed and of the next only, the
# others one click away (league/api/readmodel.py, page_rounds).
LIVE_SCHEDULE_LISTED_MAX = 600
# Seconds a league page, once rendered or checked against the league's version, is served as it
# is (league/pages/views.py): a busy league changes version with every result, and each of a
# class's new viewers would otherwise pay the check or a rendering.
LIVE_PAGE_FRESH = 1.0
# Seconds a referee started by `runreferee` holds a finished match's report for those of matches
# still in play, to send them in one batch (referee/agent.py, RefereeConfig.report_linger).
REFEREE_REPORT_LINGER = 0.02
