"""The heuristic planner (DESIGN §8.2): question types, routes and queries from the wording."""

from __future__ import annotations

import pytest

from schemas.plan import MAX_QUERIES, MAX_ROUTE_QUERIES, MAX_ROUTES, QuestionType
from workers.query.planner import heuristic_plan
from workers.query.planner.wording import unique_queries

SPEAKERS = ("Ana", "Bruno")


# --- the heuristic: question types ------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("When did Ana move to the new flat?", QuestionType.temporal),
        ("What date was the concert Bruno went to?", QuestionType.temporal),
        ("How long ago did Ana start painting?", QuestionType.temporal),
        ("Which year did Bruno finish school?", QuestionType.temporal),
        ("Did Ana adopt the cat before the move?", QuestionType.temporal),
        ("Did Bruno start running after the surgery?", QuestionType.temporal),
        ("Can you compare the two laptops Ana looked at?", QuestionType.comparison),
        ("Do Ana and Bruno both play the piano?", QuestionType.comparison),
        ("What is the difference between the gym and the pool?", QuestionType.comparison),
        ("Did Ana prefer tea or coffee?", QuestionType.comparison),
        ("Does Bruno read more than Ana?", QuestionType.comparison),
        ("How many books did Ana read?", QuestionType.aggregate),
        ("List the cities Bruno visited.", QuestionType.aggregate),
        ("What are all the pets Ana owns?", QuestionType.aggregate),
        ("Which instruments have Bruno played?", QuestionType.aggregate),
        ("Can you recommend a podcast for my commute?", QuestionType.personalized_advice),
        ("What should I cook for dinner tonight?", QuestionType.personalized_advice),
        ("Any advice on my morning routine?", QuestionType.personalized_advice),
        ("Where do you think I should practise the cello?", QuestionType.personalized_advice),
        ("I should call Ana. When is her party?", QuestionType.temporal),  # not asked
        ("What was the restaurant you recommended to me?", QuestionType.prior_assistant_response),
        ("Remind me what you said about the hiking boots.", QuestionType.prior_assistant_response),
        ("Did you mention a stretching routine?", QuestionType.prior_assistant_response),
        ("What is Ana's favourite colour?", QuestionType.single),
        ("Where does Bruno work?", QuestionType.single),
    ],
)
def test_heuristic_question_type_from_wording(question: str, expected: QuestionType) -> None:
    plan = heuristic_plan(question)
    assert plan.question_type is expected
    assert plan.source == "heuristic"


# --- the heuristic: routes -------------------------------------------------------------


def test_two_named_speakers_get_one_route_each() -> None:
    plan = heuristic_plan("What do Ana and Bruno like to cook?", SPEAKERS)

    assert [r.speaker for r in plan.routes] == ["Ana", "Bruno"]
    ana, bruno = plan.routes
    assert ana.queries[0] == "Ana like to cook"
    assert bruno.queries[0] == "Bruno like to cook"
    assert all("Bruno" not in q for q in ana.queries[:2])
    assert "Ana" not in ana.queries  # a name alone is no variant (test below)
    assert "speaker: Ana" in ana.constraints


def test_speakers_are_found_without_a_speaker_list_too() -> None:
    plan = heuristic_plan("What hobbies did Ana share with Bruno?")
    assert [r.speaker for r in plan.routes] == ["Ana", "Bruno"]


def test_one_named_speaker_gives_one_route_with_that_speaker() -> None:
    plan = heuristic_plan("Where did Ana go to Lisbon from?", SPEAKERS)
    assert len(plan.routes) == 1
    assert plan.routes[0].speaker == "Ana"


def test_a_place_after_a_preposition_is_not_a_second_person() -> None:
    plan = heuristic_plan("Why did Ana move to Lisbon?")
    assert len(plan.routes) == 1
    assert plan.routes[0].speaker == "Ana"


def test_comparison_x_or_y_gets_one_route_per_item() -> None:
    plan = heuristic_plan("Which did Ana enjoy more, the hiking trip or the cooking class?")

    assert plan.question_type is QuestionType.comparison
    assert [r.queries[0] for r in plan.routes] == [
        "Ana enjoy more the hiking trip",
        "Ana enjoy more the cooking class",
    ]
    assert [r.speaker for r in plan.routes] == ["Ana", "Ana"]
    assert "cooking" not in plan.routes[0].queries[0]


def test_comparison_between_two_speakers_sets_each_routes_speaker() -> None:
    plan = heuristic_plan("Who is older, Ana or Bruno?", SPEAKERS)
    assert [r.speaker for r in plan.routes] == ["Ana", "Bruno"]
    assert plan.routes[0].queries[0] == "older Ana"


def test_single_question_gets_one_route_with_the_question_and_key_phrases() -> None:
    plan = heuristic_plan("What kind of car does Bruno drive?", SPEAKERS)

    assert len(plan.routes) == 1
    assert plan.semantic_queries == [
        "What kind of car does Bruno drive?",
        "car",  # runs of content words; the key phrase "kind of car Bruno drive" adds none
        "Bruno drive",
    ]
    assert plan.routes[0].queries == plan.semantic_queries
    assert plan.routes[0].speaker == "Bruno"
    assert plan.temporal_filter is None


def test_a_name_alone_is_no_query_variant() -> None:
    # the records name their speakers, so "Bruno" alone would draw all of Bruno's records
    plan = heuristic_plan("Who fed the cat while Bruno was away?", SPEAKERS)

    assert plan.routes[0].queries == [
        "Who fed the cat while Bruno was away?",
        "fed the cat while Bruno away",
        "fed",
        "cat",
    ]
    assert "Bruno" in plan.semantic_queries  # the plan still lists it; routes search without


# --- the heuristic: queries ------------------------------------------------------------


def test_queries_are_deduped_case_insensitively_and_capped() -> None:
    assert unique_queries(["Ana", " ana ", "ANA", "Bruno  runs", "bruno runs", ""], 5) == [
        "Ana",
        "Bruno runs",
    ]
    assert unique_queries([f"q{i}" for i in range(40)], 16) == [f"q{i}" for i in range(16)]


def test_heuristic_plan_respects_the_caps_and_has_no_duplicates() -> None:
    names = [f"Name{chr(65 + i)}" for i in range(12)]
    question = "What do " + ", ".join(names) + " and Zed like?"
    plan = heuristic_plan(question, [*names, "Zed"])

    assert len(plan.routes) == MAX_ROUTES
    assert len(plan.semantic_queries) <= MAX_QUERIES
    assert all(len(r.queries) <= MAX_ROUTE_QUERIES for r in plan.routes)
    folded = [" ".join(q.casefold().split()) for q in plan.semantic_queries]
    assert len(folded) == len(set(folded))


def test_heuristic_plan_is_deterministic() -> None:
    question = "Did Ana prefer tea or coffee on 8 May 2023?"
    plans = [heuristic_plan(question, SPEAKERS).model_dump_json() for _ in range(3)]
    assert len(set(plans)) == 1


def test_blank_question_is_refused() -> None:
    with pytest.raises(ValueError):
        heuristic_plan("   ")


def test_a_coordinated_question_gets_one_route_per_question() -> None:
    plan = heuristic_plan("Where did Ana sleep in Bergen and who did she hike with?")
    assert [r.queries[0] for r in plan.routes] == [
        "Where did Ana sleep in Bergen?",
        "who did Ana hike with?",
    ]
    assert all(r.speaker == "Ana" for r in plan.routes)


def test_a_trailing_question_word_is_not_a_question_of_its_own() -> None:
    assert len(heuristic_plan("What did Ana bake and when?").routes) == 1


# --- the heuristic: questions about the whole history -------------------------------------


@pytest.mark.parametrize(
    ("question", "topic"),
    [
        (
            "In what order did I bring up the different aspects of planning my garden shed "
            "across our chats? Only three items.",
            "planning garden shed",
        ),
        (
            "Summarize how I handled the wiring and the roof of the shed, please.",
            "handled wiring roof shed",
        ),
    ],
)
def test_a_history_question_is_searched_by_its_topic_not_its_frame(
    question: str, topic: str
) -> None:
    plan = heuristic_plan(question)
    assert plan.semantic_queries[:2] == [question, topic]
    frame = {"order", "aspects", "summarize", "items", "chats"}
    assert not frame & {q.lower() for q in plan.semantic_queries}
    assert all(q.lower() not in frame for r in plan.routes for q in r.queries)


def test_a_history_questions_compared_items_leave_its_frame_out() -> None:
    """ "my garden and shed progress across our chats" compares the garden and the
    shed; "progress across" is the request's frame, searched with neither."""
    question = (
        "In what order did I mention different aspects of my garden and shed progress across "
        "our chats? Only three items."
    )
    plan = heuristic_plan(question)
    assert [r.queries for r in plan.routes] == [["garden", "garden shed"], ["shed", "garden shed"]]
    assert not {"across", "progress", "my"} & {
        w.lower() for q in plan.semantic_queries[1:] for w in q.split()
    }


def test_the_key_phrase_is_a_query_when_it_says_more_than_the_noun_phrases() -> None:
    question = "Which color did Ana paint the fence, the shed, the gate and the porch?"
    plan = heuristic_plan(question)
    key = "color Ana paint the fence the shed the gate and the porch"  # "shed": no phrase has it
    assert plan.semantic_queries == [question, key, "color", "Ana paint", "fence"]
    covered = heuristic_plan("What did Ana bake for the party last week?")
    assert covered.semantic_queries == [covered.routes[0].queries[0], "Ana bake", "party", "week"]
    assert covered.evidence_target == "Ana bake for the party last week"


def test_a_number_right_after_a_phrase_is_its_last_word() -> None:
    """ "locker code 17" names one locker code: the number tells it from its neighbours, so
    the full-text search of the phrase finds that one first; a number cut by a separator
    ("2,500", "3.4.1") or after a stop word is left out as before."""
    from workers.query.planner.wording import noun_phrases

    assert noun_phrases("What is locker code 17?") == ["locker code 17"]
    assert noun_phrases("Is room 204, on the left?", None) == ["room 204", "left"]
    assert noun_phrases("Which locker code is 1031?") == ["locker code"]
    assert noun_phrases("the site using Tailwind 3.4.1") == ["site using Tailwind"]
    assert noun_phrases("when I wrote 2,500 lines", None) == ["wrote", "lines"]
    plan = heuristic_plan("What is locker code 17?")
    assert "locker code 17" in plan.routes[0].queries
