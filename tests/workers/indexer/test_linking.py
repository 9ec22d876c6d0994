"""Which new records the supersession rules read the store about."""

from __future__ import annotations

from workers.indexer.linking import may_link, sample_denials

SAMPLE = ["Mara likes the blue kettle.", "Mara walks to the office on Mondays."]
NONE: frozenset[str] = frozenset()


def test_a_value_or_a_denial_may_link() -> None:
    assert may_link("The dashboard now answers in 250 ms.", [], NONE)
    assert may_link("Mara has never written a Flask route.", [], NONE)


def test_an_account_may_link_only_to_a_denial_of_the_same_act_in_the_namespace() -> None:
    account = "Mara wrote the login route for the budget app."
    assert not may_link(account, sample_denials(SAMPLE, NONE), NONE)
    denial = "Mara has never written a route for the budget app."
    assert may_link(account, sample_denials([*SAMPLE, denial], NONE), NONE)
    elsewhere = "Mara has never baked a sourdough loaf."
    assert not may_link(account, sample_denials([*SAMPLE, elsewhere], NONE), NONE)


def test_a_plain_statement_in_a_namespace_without_denials_is_not_read_about() -> None:
    assert not may_link("Mara enjoyed the concert with her sister.", [], NONE)
