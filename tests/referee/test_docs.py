"""The copy-paste examples of docs/protocol.md's referee and games sections run as written."""

from __future__ import annotations

import pytest

from tests.referee.conftest import run_referee
from tests.support.doc_examples import assert_same_shape, examples, run_example

SECTIONS = ("Referee side", "Games")
EXAMPLES = [example for section in SECTIONS for example in examples(section)]


def test_it_has_examples_for_the_referee():
    assert len(examples("Referee side")) >= 3


@pytest.fixture(scope="module")
def referee_url():
    with run_referee(name="Referee-8001", register=False, max_concurrent=4) as running:
        yield running.url


@pytest.mark.parametrize("example", EXAMPLES, ids=str)
def test_it_answers_as_the_docs_show(example, referee_url):
    assert_same_shape(run_example(example, {"REFEREE": referee_url}), example.expected)
