"""leagueproto/jsonutil.py: the encoder Django's JSONFields write a match's result with."""

from __future__ import annotations

import json

import orjson

from leagueproto.jsonutil import OrjsonEncoder


def test_the_encoder_writes_what_orjson_writes_and_falls_back_where_orjson_cannot():
    log = [{"from": "REF01", "message": {"message_type": "CHOOSE_PARITY_CALL", "n": 1, "é": True}}]
    assert json.dumps(log, cls=OrjsonEncoder) == orjson.dumps(log).decode()
    assert json.loads(json.dumps({1: [1.5, None]}, cls=OrjsonEncoder)) == {"1": [1.5, None]}
    huge = {"n": 2**70}  # beyond orjson's 64 bits: json's own encoder writes it
    assert json.dumps(huge, cls=OrjsonEncoder) == json.dumps(huge)
