"""State changes of the League Manager: named functions, each one transaction, broadcasting after commit.

The LM tools, the admin and the ``league`` command all change state through these functions, so
every path obeys the same rules and leaves the same trail in the Event log:

- ``leagues``: a league's life cycle (open, start, pause, resume, cancel, delete) and the admin's
  actions on agents;
- ``registration``: players and referees joining (and referee keys);
- ``outcomes``: whether a reported result may stand (scoring rules, match log);
- ``results``: recording results, a batch of reports in one transaction.
"""

from league.actions.leagues import (
    FINAL,
    IN_PLAY,
    cancel_league,
    close_registration,
    create_league,
    create_match,
    delete_league,
    league_records,
    open_registration,
    pause_league,
    reinstate_agent,
    resume_league,
    revoke_agent,
    set_agent_status,
    start_league,
)
from league.actions.outcomes import check_match_log, checked_outcome, report_digest, validated_outcome
from league.actions.registration import (
    ENDPOINT_OF_OTHER_KIND,
    ENDPOINT_TAKEN,
    GAME_TYPE_NOT_SUPPORTED,
    LEAGUE_FULL,
    NO_RELAY_ADDRESS,
    REGISTRATION_CLOSED,
    RELAY_NAME_TAKEN,
    UNKNOWN_PROTOCOL_VERSION,
    Registration,
    RegistrationRequest,
    check_referee_key,
    generate_referee_key,
    register_all,
    register_player,
    register_referee,
    registration_league,
    revoke_referee_key,
)
from league.actions.results import LAST_SEEN_EVERY, Recorded, Report, mark_round_played, record_result, record_results

__all__ = [
    "FINAL",
    "IN_PLAY",
    "ENDPOINT_OF_OTHER_KIND",
    "ENDPOINT_TAKEN",
    "GAME_TYPE_NOT_SUPPORTED",
    "LAST_SEEN_EVERY",
    "LEAGUE_FULL",
    "NO_RELAY_ADDRESS",
    "REGISTRATION_CLOSED",
    "RELAY_NAME_TAKEN",
    "UNKNOWN_PROTOCOL_VERSION",
    "Recorded",
    "Registration",
    "RegistrationRequest",
    "Report",
    "check_match_log",
    "check_referee_key",
    "checked_outcome",
    "close_registration",
    "create_league",
    "create_match",
    "generate_referee_key",
    "mark_round_played",
    "open_registration",
    "record_result",
    "record_results",
    "register_all",
    "register_player",
    "register_referee",
    "registration_league",
    "report_digest",
    "revoke_agent",
    "revoke_referee_key",
    "set_agent_status",
    "start_league",
    "validated_outcome",
    "cancel_league",
    "delete_league",
    "league_records",
    "pause_league",
    "reinstate_agent",
    "resume_league",
]
