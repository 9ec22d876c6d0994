"""The offline supersession rules on statements written for the tests (no data set text)."""

from __future__ import annotations

from datetime import datetime

import pytest

from schemas.supersession import LinkKind
from workers.indexer.statements import Statement, earlier
from workers.indexer.supersession import denied, link_statements
from workers.indexer.values import values_of

DAY1, DAY2 = datetime(2024, 3, 1), datetime(2024, 4, 2)


def said(rid: str, text: str, day: datetime | None = DAY1, seq: int = 0, **kw: str) -> Statement:
    return Statement(
        record_id=rid,
        text=text,
        role=kw.get("role", "user"),
        session_id=kw.get("session", f"s{day.day if day else 0}"),
        said_at=day,
        position=(0, seq),
    )


def test_values_of_reads_kinds_and_the_words_naming_them() -> None:
    (v,) = values_of("The telescope mount now tracks at 40 ms per step.")
    assert (v.kind, v.amount) == ("duration:ms", 40.0)
    assert {"telescope", "mount", "track"} <= v.attribute
    (d,) = values_of("The kiln firing is due on May 3rd, 2025 for the glaze batch.")
    assert (d.kind, d.amount) == ("date", 20250503)  # its year, when it says one
    (e,) = values_of("The kiln firing moved to 9 May 2025.")  # the encoders' own form
    assert (e.kind, e.amount) == ("date", 20250509)
    assert all(v.kind != "date" for v in values_of("I think 2 may be enough."))
    assert values_of("I upgraded the library to v2.4.1 in 2023.") == []  # a version, a year


def test_a_later_value_of_the_same_attribute_supersedes_the_earlier() -> None:
    old = said("r1", "The greenhouse heater draws 900 watts on cold nights.", DAY1)
    new = said("r2", "The greenhouse heater now draws 650 watts on cold nights.", DAY2)
    (link,) = link_statements("ns", [new, old])
    assert (link.kind, link.older_id, link.newer_id) == (LinkKind.supersedes, "r1", "r2")
    assert link.changed_at == DAY2 and link.found_by == "rule:value-change"
    assert "900 watts then 650 watts" in link.reason


def test_a_reason_after_a_value_is_not_what_it_is_of() -> None:
    """ "... went up to $2,000 since the new employer pays half": the reason is no part of
    the budget, so the next value of the budget replaces this one, not the first."""
    (v,) = values_of("My laptop budget went up to $2,000 since the new employer pays half.")
    assert v.following == frozenset() and v.shown == "$2,000"
    (w,) = values_of("The pump has run at 40 watts since March.")  # since when: no clause
    assert w.shown == "40 watts"
    first = said("r1", "My laptop budget is $1,500.", DAY1)
    middle = said(
        "r2", "My laptop budget went up to $2,000 since the new employer pays half.", DAY2
    )
    last = said("r3", "Update: my laptop budget is now $2,400.", datetime(2024, 5, 6))
    pairs = {(x.older_id, x.newer_id) for x in link_statements("ns", [first, middle, last])}
    assert pairs == {("r1", "r2"), ("r2", "r3")}


def test_no_link_when_unsure() -> None:
    old = said("r1", "The greenhouse heater draws 900 watts.", DAY1)
    same = said("r2", "The greenhouse heater draws 900 watts, as I said.", DAY2)
    other = said("r3", "The bakery oven now draws 650 watts.", DAY2)  # another attribute
    undated = said("r4", "The greenhouse heater now draws 700 watts.", None)
    assistant = said("r5", "The greenhouse heater now draws 600 watts.", DAY2, role="assistant")
    assert link_statements("ns", [old, same, other, undated, assistant]) == []


def test_order_is_known_within_a_session_or_across_dates_only() -> None:
    a, b = said("a", "x", DAY1, seq=1), said("b", "y", DAY1, seq=2)
    c = said("c", "z", DAY1, session="other")
    assert earlier(a, b) is True and earlier(b, a) is False
    assert earlier(a, c) is None  # two sessions of one date
    assert earlier(a, said("d", "w", DAY2)) is True


def test_a_denial_after_an_account_of_doing_it_is_a_conflict() -> None:
    did = said("r1", "I wrote the serial driver for the rover's compass module.", DAY1)
    never = said("r2", "I've never written any serial driver for the compass module.", DAY2)
    assert denied(never.text) is not None and denied(did.text) is None
    (link,) = link_statements("ns", [did, never])
    assert (link.kind, link.older_id, link.newer_id) == (LinkKind.conflict, "r1", "r2")
    assert link.found_by == "rule:never-but-did"


def test_an_account_after_a_denial_settles_it() -> None:
    never = said("r1", "I've never written any serial driver for the compass module.", DAY1)
    did = said("r2", "I wrote the serial driver for the compass module last week.", DAY2)
    (link,) = link_statements("ns", [never, did])
    assert (link.kind, link.older_id, link.newer_id) == (LinkKind.supersedes, "r1", "r2")


def test_a_goal_does_not_replace_a_reading_nor_a_reading_a_goal() -> None:
    goal = said("r1", "I am trying to get the kiln preheat down to 40 minutes.", DAY1)
    reading = said("r2", "The kiln preheat now takes 55 minutes.", DAY2)
    assert link_statements("ns", [goal, reading]) == []
    # two readings of the same attribute still link
    first = said("r3", "The kiln preheat takes 70 minutes.", DAY1)
    (link,) = link_statements("ns", [first, reading])
    assert (link.older_id, link.newer_id) == ("r3", "r2")


def test_from_x_to_y_holds_y_and_replaces_only_an_x_it_names() -> None:
    (was, now) = values_of("The kiln preheat dropped from 70 to 55 minutes.")
    assert was.stale and not now.stale and now.was == 70.0
    older = said("r1", "The kiln preheat takes 70 minutes.", DAY1)
    newer = said("r2", "The kiln preheat dropped from 70 to 55 minutes.", DAY2)
    (link,) = link_statements("ns", [older, newer])
    assert "70 minutes then 55 minutes" in link.reason
    # a change from another value is the change of another thing worded alike
    other = said("r3", "The kiln preheat dropped from 90 to 50 minutes.", DAY2)
    assert link_statements("ns", [older, other]) == []


def test_a_change_that_names_what_it_was_and_the_same_name_needs_no_more() -> None:
    (now, was) = values_of("Tessa ended up with 6 kilns instead of 4 after the audit.")
    assert (now.amount, now.was, was.stale) == (6.0, 4.0, True)
    (now, was) = values_of("The studio rent is 1,150 euros, up from 900 euros.")
    assert (now.amount, now.was, was.stale) == (1150.0, 900.0, True)
    (was, now) = values_of("Tessa moved the studio from Kilnware 3 to Kilnware 4 in May.")
    assert (was.stale, now.was, was.label, now.label) == (True, 3.0, "kilnware", "kilnware")
    # the speaker's name, common in the namespace, tells nothing: the name before both does
    filler = [said(f"f{i}", f"Tessa glazed bowl number {i} today.", DAY1) for i in range(12)]
    app = said("r3", "Tessa runs the shop on Kilnware 3 at home.", DAY1, seq=2)
    upgrade = said("r4", "Tessa upgraded the shop from Kilnware 3 to Kilnware 4.", DAY2, seq=1)
    (link,) = link_statements("ns", [*filler, app, upgrade])
    assert (link.older_id, link.newer_id) == ("r3", "r4")
    # an old amount alone is weak: small counts recur, and the unit names no owner
    kids = said("r5", "Tessa has 3 kids.", DAY1, seq=3)
    neighbour = said("r6", "Tessa's neighbour Ben has 5 kids instead of 3.", DAY2, seq=2)
    older = said("r1", "Tessa will fire with 4 kilns.", DAY1, seq=1)
    newer = said("r2", "Tessa ended up with 6 kilns instead of 4 after the audit.", DAY2)
    assert link_statements("ns", [*filler, kids, neighbour, older, newer]) == []


def test_a_time_of_day_is_one_value() -> None:
    assert [(v.kind, v.amount) for v in values_of("The ferry leaves at 9:30 daily.")] == [
        ("time", 570.0)
    ]
    assert all(v.kind != "time" for v in values_of("I read verse 3:16 and 09:15:00 logs."))
    assert [v.amount for v in values_of("Dinner is at 7 pm, or 7:45 p.m. on Fridays.")] == [
        1140.0,
        1185.0,
    ]
    older = said("r1", "The harbour team standup is at 9:30 each morning.", DAY1)
    newer = said("r2", "The harbour team standup moved to 10:00.", DAY2)
    (link,) = link_statements("ns", [older, newer])
    assert "9:30 then 10:00" in link.reason


def test_the_size_of_a_change_is_not_a_value() -> None:
    a = said("r1", "The glaze editor cut the kiln preheat by 20% this week.", DAY1)
    b = said("r2", "The glaze editor now cut the kiln preheat by 35% this week.", DAY2)
    (v,) = values_of(b.text)
    assert v.delta
    assert link_statements("ns", [a, b]) == []


def test_a_request_is_not_an_account_of_having_done_it() -> None:
    asked = said("r1", "Can you help me write a serial driver for the compass module?", DAY1)
    trying = said("r2", "I am trying to write the serial driver for the compass module.", DAY1)
    never = said("r3", "I've never written any serial driver for the compass module.", DAY2)
    assert link_statements("ns", [asked, trying, never]) == []


def test_a_fact_restated_often_stays_one_attribute_however_common_its_words() -> None:
    """The namespace's common words tell attributes apart only where the rest differs: the
    tenth statement of one weight is still about it (before, its words had become common
    and no later update linked)."""
    texts = [f"Ana's body weight is now {80 - i} kg." for i in range(10)]
    chain = [said(f"r{i}", t, datetime(2024, 3, 1 + i)) for i, t in enumerate(texts)]
    links = link_statements("ns", chain)
    assert {(x.older_id, x.newer_id) for x in links} == {(f"r{i}", f"r{i + 1}") for i in range(9)}
    hosting = said("h", "Ana's project costs $50 for the hosting.", DAY1)
    domain = said("d", "Ana's project now costs $20 for the domain.", DAY2)
    assert link_statements("ns", [hosting, domain], frozenset({"ana", "project"})) == []


def test_another_owner_or_another_named_thing_is_not_the_same_attribute() -> None:
    mine = said("r1", "Ana's monthly rent is $1,200.", DAY1)
    sisters = said("r2", "Ana's sister Eva's monthly rent is now $950.", DAY2)
    assert link_statements("ns", [mine, sisters]) == []
    berlin = said("b", "Ana's flight to Berlin leaves on March 3.", DAY1)
    tokyo = said("t", "Ana's flight to Tokyo now leaves on April 9.", DAY2)
    assert link_statements("ns", [berlin, tokyo]) == []
    moved = said("m", "Ana's flight to Berlin now leaves on March 5.", DAY2)
    assert [(x.older_id, x.newer_id) for x in link_statements("ns", [berlin, moved])] == [
        ("b", "m")
    ]


def test_a_date_that_slipped_or_was_corrected_is_a_change_and_its_year_counts() -> None:
    launch = said("l1", "The product launch is on May 3.", DAY1)
    slipped = said("l2", "The product launch slipped to June 10.", DAY2)
    assert len(link_statements("ns", [launch, slipped])) == 1
    fee = said("f1", "The gym membership costs $40 a month.", DAY1, seq=0)
    fixed = said("f2", "Correction: the gym membership costs $45 a month.", DAY1, seq=1)
    assert len(link_statements("ns", [fee, fixed])) == 1
    this_year = said("y1", "The product launch is on 3 May 2025.", DAY1)
    next_year = said("y2", "The product launch is now on 3 May 2026.", DAY2)
    same_day = said("y3", "The product launch is now on May 3.", DAY2)
    assert len(link_statements("ns", [this_year, next_year])) == 1
    assert link_statements("ns", [this_year, same_day]) == []


def test_two_sessions_of_one_date_that_change_a_value_to_two_others_conflict() -> None:
    """Which of the two came later is not known: neither is current, both are shown."""
    fee = said("f", "The gym membership costs $45 a month.", DAY1)
    one = said("a", "The gym membership now costs $50 a month.", DAY2, session="x")
    two = said("b", "The gym membership now costs $55 a month.", DAY2, session="y")
    links = {(x.kind, x.older_id, x.newer_id) for x in link_statements("ns", [fee, one, two])}
    assert links == {
        (LinkKind.supersedes, "f", "a"),
        (LinkKind.supersedes, "f", "b"),
        (LinkKind.conflict, "a", "b"),
    }
    same = said("c", "The gym membership now costs $50 a month.", DAY2, session="z")
    assert all(x.kind is LinkKind.supersedes for x in link_statements("ns", [fee, one, same]))


def test_a_day_said_to_have_slipped_replaces_the_plan_it_names() -> None:
    """One word of subject ("the launch") is enough when the later day says it changed and
    names nothing the earlier day's words do not."""
    plan = said("r1", "Bo handles the deploys, and the launch is planned for June 3.", DAY1)
    slip = said("r2", "The launch slipped to July 15 because of the supplier.", DAY2)
    party = said("r3", "The launch party is now on July 20.", DAY2, session="s3")
    links = link_statements("ns", [plan, slip])
    assert [(k.older_id, k.newer_id, k.reason) for k in links] == [
        ("r1", "r2", "launch: June 3 then July 15")
    ]
    # another thing worded alike (a party), or a later day not said to change: no link
    assert link_statements("ns", [plan, party]) == []
    again = said("r4", "The launch is on July 15.", DAY2)
    assert link_statements("ns", [plan, again]) == []
    # the day of the same thing, and of it alone, before a plan that mentions it
    review = said("v1", "The review is on June 10.", DAY1)
    prep = said("v2", "I start prepping for the review on June 3.", DAY1, seq=1)
    moved = said("v3", "The review slipped to June 20.", DAY2)
    (link,) = link_statements("ns", [review, prep, moved])
    assert (link.older_id, link.reason) == ("v1", "review: June 10 then June 20")
    both = said("w1", "My trip starts June 3 and my review is June 10.", DAY1)
    later = said("w2", "My review was moved to June 20.", DAY2)
    (link,) = link_statements("ns", [both, later])
    assert link.reason.endswith("June 10 then June 20")


def test_a_day_said_due_is_the_deadline_a_later_one_changes() -> None:
    """ "due on" and "deadline" name one day; the reason shows the words as said."""
    due = said("d1", "My thesis is due on October 15.", DAY1)
    slipped = said("d2", "The thesis deadline slipped to November 30.", DAY2)
    (link,) = link_statements("ns", [due, slipped])
    assert (link.older_id, link.newer_id) == ("d1", "d2")
    assert link.reason == "deadline, thesis: October 15 then November 30"
    # a day of another thing worded alike: the party is not the launch
    party = said("p1", "The product launch party is on May 3.", DAY1)
    launch = said("p2", "The product launch slipped to June 1.", DAY2)
    assert link_statements("ns", [party, launch]) == []


def test_a_named_thing_that_gave_way_to_another_replaces_the_statement_of_it() -> None:
    stack = said("r1", "Our kiln app is written in Flask and runs on Heroku.", DAY1)
    asked = said("r2", "Can you help me add a route to the Flask app?", DAY1, seq=1)
    switch = said("r3", "We switched from Flask to FastAPI for the kiln app.", DAY2)
    links = link_statements("ns", [stack, asked, switch])
    assert [(k.older_id, k.newer_id, k.reason, k.found_by) for k in links] == [
        ("r1", "r3", "Flask then FastAPI", "rule:name-change")
    ]
    off = said("r4", "We moved off Heroku last month.", DAY2)
    (link,) = link_statements("ns", [stack, off])
    assert (link.older_id, link.reason) == ("r1", "Heroku left")
    # the same side only, one statement only (the one most like the change, else the
    # first to name it), never one that names the new thing
    theirs = said("r5", "Your app runs on Flask.", DAY1, role="assistant")
    later = said("r6", "The glaze shop's pages are in Flask too.", DAY1, seq=2)
    both = said("r7", "We tried FastAPI once, but Flask stayed.", DAY1, seq=3)
    found = link_statements("ns", [stack, theirs, later, both, switch])
    assert [(k.older_id, k.newer_id) for k in found] == [("r1", "r3")]
    moved = said("r9", "We moved the site from Flask to Django.", DAY2)
    found = link_statements("ns", [later, stack, moved])
    assert [(k.older_id, k.newer_id) for k in found] == [("r1", "r9")]  # the first to name it
    # a chain: the switch to Flask is what the switch away from it replaces
    first = said("r8", "We moved the kiln app from Django to Flask.", DAY1, seq=4)
    found = link_statements("ns", [first, switch])
    assert [(k.older_id, k.newer_id) for k in found] == [("r8", "r3")]
    # the statement most like the change before the first to name it; never a question
    school = said("r10", "I learned Flask at school.", DAY1, seq=0)
    pages = said("r11", "The kiln app renders its pages with Flask.", DAY1, seq=5)
    found = link_statements("ns", [school, pages, switch])
    assert [(k.older_id, k.newer_id) for k in found] == [("r11", "r3")]
    assert link_statements("ns", [asked, switch]) == []


def test_a_named_thing_said_to_hold_now_replaces_the_statement_of_another() -> None:
    """ "I now work at Globex" after "I work at Acme": no change verb, but "now" says one."""
    acme = said("r1", "I work at Acme as a kiln designer.", DAY1)
    globex = said("r2", "I now work at Globex.", DAY2)
    (link,) = link_statements("ns", [globex, acme])
    assert (link.older_id, link.newer_id, link.kind) == ("r1", "r2", LinkKind.supersedes)
    assert (link.reason, link.found_by) == ("Acme then Globex", "rule:now-named")
    # the latest earlier statement of the same doing: a chain, by the speaker's name too
    initech = said("r3", "Noor is now working at Initech.", datetime(2024, 5, 6))
    found = link_statements("ns", [acme, globex, initech], speakers={"noor"})
    assert sorted((k.older_id, k.newer_id) for k in found) == [("r1", "r2"), ("r2", "r3")]
    moved = said("r4", "I'm now living in Bergen.", DAY2)
    (link,) = link_statements("ns", [said("r5", "I live in Oslo with my cat.", DAY1), moved])
    assert link.reason == "Oslo then Bergen"


@pytest.mark.parametrize(
    "later",
    [
        "I now also work at Globex.",  # one more, not another
        "I now work at Globex as well.",
        "I work at Globex.",  # no "now": a second job, maybe
        "My brother now works at Globex.",  # someone else
        "I now live in Globex.",  # another doing
        "I now work at Globex, which bought Acme.",  # it names the old one
        "Should I now work at Globex?",  # asks
    ],
)
def test_a_name_said_without_a_change_of_the_same_doing_replaces_nothing(later: str) -> None:
    acme = said("r1", "I work at Acme as a kiln designer.", DAY1)
    assert link_statements("ns", [acme, said("r2", later, DAY2)]) == []
    assert link_statements("ns", [said("r2", "I now work at Globex.", DAY1), acme]) == []


@pytest.mark.parametrize(
    ("earlier_said", "later"),
    [
        ("I talk to Bob every Sunday.", "I now talk to Tove every day."),  # they add up
        ("I listen to Bach while I work.", "I now listen to Radiohead."),
        ("We deploy to Staging first.", "We now deploy to Production."),
    ],
)
def test_doings_that_add_up_are_not_replaced_by_one_said_now(earlier_said: str, later: str) -> None:
    assert link_statements("ns", [said("r1", earlier_said, DAY1), said("r2", later, DAY2)]) == []


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Noor moved from Acme to Globex.", [("Acme", "Globex")]),  # the speaker, by name
        ("We host it on Fly.io instead of Heroku now.", [("Heroku", "Fly.io")]),
        ("We moved from New York City to Boston.", [("New York City", "Boston")]),
        ("We're no longer on Heroku.", [("Heroku", None)]),
        # dated as the extractive encoder writes "last week" and "earlier this year"
        (
            "We switched from Flask to FastAPI during the week of 13 June 2024.",
            [("Flask", "FastAPI")],
        ),
        ("We moved from Heroku to Fly.io earlier this year.", [("Heroku", "Fly.io")]),
        # one let go and another taken, in one sentence
        ("We dropped Brightline and hired Kestrel Studio.", [("Brightline", "Kestrel Studio")]),
        ("I quit Acme and joined Globex last month.", [("Acme", "Globex")]),
        ("My sister dropped Acme and hired Globex.", []),
        ("We left Rome and moved to Naples for a week.", []),  # a trip
        ("I left Tokyo and went with Ken to Osaka.", []),
        ("We switched from Postgres to SQLite during testing.", []),  # for a while
        # someone else's change, a plan, a denial, a condition, a preference
        ("Ana moved from Acme to Globex.", []),
        ("My brother switched from Toyota to Honda.", []),
        ("I'm thinking about switching from Flask to FastAPI.", []),
        ("We never switched from Flask to FastAPI.", []),
        ("If we moved off AWS, costs would drop.", []),
        ("I'd rather use Postgres instead of MySQL.", []),
        ("Bob instead of Ana presented the talk.", []),
        # a trip, a bus, a part of the thing: nothing replaced
        ("On day two we went from Paris to Rome.", []),
        ("We left Boston for Denver for a ski weekend.", []),
        ("The bus stopped on Main Street.", []),
        ("I stopped using Slack notifications.", []),
        ("We moved off Heroku's free tier.", []),
    ],
)
def test_a_name_change_is_the_speakers_own_and_of_the_whole_thing(
    text: str, found: list[tuple[str, str | None]]
) -> None:
    from workers.indexer.renamed import renamings

    assert [(r.old, r.new) for r in renamings(text, frozenset({"noor"}))] == found


def test_what_reads_as_a_named_change() -> None:
    from workers.indexer.renamed import Renaming, renamings

    assert renamings("Ana replaced Jenkins with GitHub Actions.") == [
        Renaming("Jenkins", "GitHub Actions")
    ]
    assert renamings("We host it on Fly.io instead of Heroku now.") == [
        Renaming("Heroku", "Fly.io")
    ]
    assert renamings("We no longer use Trello.") == [Renaming("Trello", None)]
    assert renamings("I moved from the Porto office to the Lisbon one.") == []  # no name there
    assert renamings("The price moved from 10 to 12.") == []  # a value: the value rule's
    assert renamings("Switched from Flask to flask-restx.") == []  # lower case: not a name


def test_a_value_said_to_change_replaces_the_value_of_the_same_word_before_it() -> None:
    """One shared word is enough when it is what both values are of, right before each."""
    days = [datetime(2025, 1, d) for d in (6, 20, 27)]
    first = said("b1", "The kiln deadline is March 14 and Ana's budget is $40,000.", days[0])
    cut = said("b2", "Update: finance cut Ana's budget to $32,000.", days[1])
    up = said("b3", "Good news: the budget went back up to $45,000 after the review.", days[2])
    # Ana speaks: an encoder writes her name for "I", common in her namespace
    links = link_statements("ns", [first, cut, up], frozenset({"ana"}))
    assert {(k.older_id, k.newer_id) for k in links} == {("b1", "b2"), ("b2", "b3")}
    assert {(k.older_id, k.newer_id) for k in link_statements("ns", [first, cut, up])} == {
        ("b1", "b2")  # "the budget" beside someone else's: whose is not known
    }
    # or a speaker of the namespace, however few of its statements say her name
    spoken = link_statements("ns", [first, cut, up], speakers=frozenset({"ana"}))
    assert {(k.older_id, k.newer_id) for k in spoken} == {("b1", "b2"), ("b2", "b3")}
    assert len(link_statements("ns", [first, cut, up], speakers=frozenset({"bo"}))) == 1
    # another owner, or qualified on one side: not the same value
    for old, new in [
        ("My salary is $90,000.", "My wife's salary went up to $70,000."),
        ("Our budget is $40,000.", "Their budget was cut to $30,000."),
        ("My score was 85.", "Her score went up to 92."),
        ("Our budget is $40,000.", "The travel budget was cut to $3,000."),
        ("I earn $5,000 a month.", "My brother now earns $7,000 a month."),
        # the one qualifier left out, but an amount far apart or of another period
        ("The parking rent is $100.", "The rent went up to $1,350."),
        ("The annual price is $120.", "The price is now $15."),
        ("The wedding budget is $30,000.", "The budget is now $2,500 per month."),
    ]:
        pair = [said("o", old, days[0]), said("n", new, days[1])]
        assert link_statements("ns", pair) == [], (old, new)
    # qualified apart, or of another thing after it: two budgets, two costs
    travel = said("t1", "The travel budget is $3,000.", days[0])
    events = said("t2", "The events budget is now $5,000.", days[1])
    assert link_statements("ns", [travel, events]) == []
    kitchen = said("k1", "The budget for Ann's kitchen renovation is $500.", days[0])
    shed = said("k2", "The budget for Ann's garden shed is now $650.", days[1])
    assert link_statements("ns", [kitchen, shed]) == []  # whose they are names neither
    hosting = said("h1", "It costs $50 for the hosting.", days[0])
    domain = said("h2", "It now costs $20 for the domain.", days[1])
    assert link_statements("ns", [hosting, domain]) == []


def test_the_value_unqualified_is_the_one_qualified_value_of_its_word() -> None:
    """ "The budget is now $2,500" after "our cloud budget is $4,000": the one budget the
    namespace qualifies, while beside a travel budget it could be either."""
    days = [datetime(2025, 1, d) for d in (6, 20, 27)]
    cloud = said("c1", "Our cloud budget is $4,000 per month.", days[0])
    now = said("c2", "The budget is now $2,500 per month.", days[2])
    links = link_statements("ns", [cloud, now])
    assert [(k.older_id, k.newer_id) for k in links] == [("c1", "c2")]
    travel = said("c3", "The travel budget is $900.", days[1])
    assert link_statements("ns", [cloud, travel, now]) == []
    # the newer qualified and the older not: still two budgets (a travel budget is not ours)
    ours = said("o1", "Our budget is $40,000.", days[0])
    cut = said("o2", "The travel budget was cut to $3,000.", days[1])
    assert link_statements("ns", [ours, cut]) == []
