"""The copy-paste examples of docs/protocol.md's Wire format, League Manager and Error codes sections
run against a live LM and must answer what the docs show."""

from __future__ import annotations

from tests.league.lm_support import make_league
from tests.support.doc_examples import assert_same_shape, examples, run_example

SECTIONS = ("Wire format", "League Manager", "Error codes")


def test_the_lm_examples_in_the_docs_work(lm_server):
    make_league("league_2025_even_odd")
    found = [example for section in SECTIONS for example in examples(section)]
    assert len(found) >= 10
    for example in found:
        actual = run_example(example, {"LM": lm_server})
        try:
            assert_same_shape(actual, example.expected)
        except AssertionError as exc:
            raise AssertionError(f"{example}: {exc}") from exc
