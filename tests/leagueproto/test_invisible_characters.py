"""Text copied from the course's PDF carries invisible characters (a soft hyphen, U+00AD, where a
line could break): removed from the envelope and ids of every message received; a timestamp that
still fails names them."""

from __future__ import annotations

import pytest

from leagueproto.envelope import invisible_in, parse_timestamp, strip_invisible, validate_envelope
from leagueproto.errors import LeagueError


def test_soft_hyphens_and_zero_width_characters_are_removed_from_the_envelope_and_ids():
    message = {
        "protocol": "league.\u00adv2",
        "message_type": "CHOOSE_\u00adPARITY_\u200bRESPONSE",
        "sender": "player:P\u00ad01",
        "timestamp": "2025-01-15T10:\u00ad30:00Z",
        "conversation_id": "\ufeffconv-001",
        "match_id": "R1\u00adM1",
        "player_id": "P0\u20601",
        "parity_choice": "even",
    }
    validate_envelope(message)
    assert message == {
        "protocol": "league.v2",
        "message_type": "CHOOSE_PARITY_RESPONSE",
        "sender": "player:P01",
        "timestamp": "2025-01-15T10:30:00Z",
        "conversation_id": "conv-001",
        "match_id": "R1M1",
        "player_id": "P01",
        "parity_choice": "even",
    }


def test_a_timestamp_that_still_holds_one_names_the_character():
    with pytest.raises(LeagueError) as caught:
        parse_timestamp("2025-01-15T10:\u00ad30:00Z")
    assert caught.value.code.value == "E021"
    assert "U+00AD SOFT HYPHEN" in caught.value.description and "type it again" in caught.value.description


def test_other_text_is_left_alone():
    assert strip_invisible("conv-001") == "conv-001" and strip_invisible(7) == 7
    assert invisible_in("a\u00adb\u00adc\u200b") == ["U+00AD SOFT HYPHEN", "U+200B ZERO WIDTH SPACE"]
