"""The offline extractive encoder, on hand-made segments with hand-checked expectations.

The session date is 2023-05-08 13:56, a Monday; the dates it resolves are tested in
`test_relative_dates.py`.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from schemas import Role, Segment, SegmentExchange, Turn
from schemas.records import MemoryRecord, MemoryType, TokenUsage
from tests.workers.builders import segment_of
from workers.encoder.extractive import encode_extractive

DATE = datetime(2023, 5, 8, 13, 56)
Line = tuple[str | None, str] | tuple[str | None, str, Role]


def segment(*lines: Line, date: datetime | None = DATE, caption: str | None = None) -> Segment:
    """One exchange per line: (speaker, text[, role]); turn ids D1:1, D1:2, ..."""
    exchanges = []
    for i, line in enumerate(lines):
        role = line[2] if len(line) == 3 else Role.user
        turn = Turn(
            role=role,
            speaker=line[0],
            content=line[1],
            turn_id=f"D1:{i + 1}",
            image_caption=caption if i == len(lines) - 1 else None,
        )
        exchanges.append(
            SegmentExchange(
                exchange_id=f"s1:{i}", seq=i, turn_ids=[f"D1:{i + 1}"], turns=[turn], tokens=10
            )
        )
    return segment_of(exchanges, date=date)


def records(*lines: Line, date: datetime | None = DATE) -> list[MemoryRecord]:
    return encode_extractive(segment(*lines, date=date)).records


def one(speaker: str | None, text: str, date: datetime | None = DATE) -> MemoryRecord:
    (rec,) = records((speaker, text), date=date)
    return rec


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I adopted a puppy.", "Ana adopted a puppy."),
        ("My sister lives in Lisbon.", "Ana's sister lives in Lisbon."),
        ("I'm a nurse at the city hospital.", "Ana is a nurse at the city hospital."),
        ("I've been painting a lot.", "Ana has been painting a lot."),
        ("I'll bring my guitar to the party.", "Ana will bring Ana's guitar to the party."),
        ("I really love hiking in the hills.", "Ana really loves hiking in the hills."),
        ("I don't drink coffee anymore.", "Ana doesn't drink coffee anymore."),
        ("I went to the market with my dad.", "Ana went to the market with Ana's dad."),
        (
            "The teacher gave me a book that is mine now.",
            "The teacher gave Ana a book that is Ana's now.",
        ),
        ("We're moving to a bigger flat.", "Ana and others are moving to a bigger flat."),
        ("Our garden has three apple trees.", "Ana's garden has three apple trees."),
        ("I now work at the harbour museum.", "Ana now works at the harbour museum."),
        ("She answers when I ask about tides.", "She answers when Ana asks about tides."),
    ],
)
def test_first_person_resolves_to_the_speaker(text: str, expected: str) -> None:
    assert one("Ana", text).semantic_text == expected


def test_a_role_without_a_name_is_the_user() -> None:
    rec = one(None, "My cat knocked over the plant.")
    assert rec.semantic_text == "The user's cat knocked over the plant."
    assert "user" not in rec.entities


def test_entities_speakers_places_and_quoted_titles() -> None:
    recs = records(
        ("Ana", 'I finished reading "The Quiet Orchard" in Lisbon with Bruno on Sunday.'),
        ("Bruno", "Lisbon is lovely in May, and Porto too."),
    )
    assert recs[0].entities == ["Ana", "The Quiet Orchard", "Lisbon", "Bruno"]
    # "Lisbon" opens the sentence, but it was seen capitalized mid-sentence in the segment.
    assert recs[1].entities == ["Bruno", "Lisbon", "Porto"]


def test_a_capitalized_sentence_opener_is_not_an_entity() -> None:
    assert one("Ana", "Gardening keeps Ana calm every morning.").entities == ["Ana"]


def test_tags_rank_segment_frequency_then_first_occurrence() -> None:
    recs = records(
        ("Ana", "I started a pottery class in Lisbon."),
        ("Bruno", "Pottery sounds relaxing, my cousin teaches pottery."),
        ("Ana", "The class uses a glaze from Porto."),
    )
    # segment words: started pottery class lisbon | pottery sounds relaxing cousin teaches
    # pottery | class uses glaze porto -> pottery 3, class 2, every other word 1.
    assert [r.tags for r in recs] == [
        ["pottery", "class", "started", "lisbon"],
        ["pottery", "sounds", "relaxing", "cousin", "teaches"],
        ["class", "uses", "glaze", "porto"],
    ]


def test_tags_leave_out_speaker_names_and_stopwords() -> None:
    rec = one("Bruno", "Bruno really thinks the weekend market sells excellent bread.")
    # six candidate words, each seen once: the first five in order
    assert rec.tags == ["thinks", "weekend", "market", "sells", "excellent"]


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("I love spicy ramen.", MemoryType.preference),
        ("I can't stand loud music.", MemoryType.preference),
        ("I adopted a puppy yesterday.", MemoryType.event),
        ("I finally finished the quilt last weekend.", MemoryType.event),
        ("I am allergic to peanuts.", MemoryType.constraint),
        ("First soak the beans, then boil them for an hour.", MemoryType.procedure),
        ("Forgetting the sunscreen was a big mistake.", MemoryType.failure_pattern),
        ("The app supports offline maps.", MemoryType.tool_affordance),
        ("My brother is a carpenter.", MemoryType.fact),
    ],
)
def test_memory_type_rules(text: str, kind: MemoryType) -> None:
    assert one("Ana", text).memory_type is kind


@pytest.mark.parametrize(
    "text",
    [
        "hi",
        "Thanks!",
        "haha",
        "ok",
        "Congrats!",
        "Hey Bruno!",
        "That's awesome!",
        "Thank you so much, Bruno!",
        "Sorry to hear that, Bruno.",
        "So tired.",
        "Have you been to Lisbon?",
        "Thanks, Lea.",
        "Bye Lea.",
        "Totally agree, Lea.",
        "Definitely, Omar.",
        "Omar, that's rough.",
        "Night, Omar!",
    ],
)
def test_filler_greetings_and_questions_make_no_record(text: str) -> None:
    recs = records(("Ana", text), ("Bruno", "Bruno grows tomatoes on the balcony."))
    assert [(r.semantic_text, r.evidence) for r in recs] == [
        ("Bruno grows tomatoes on the balcony.", ["D1:2"])
    ]


@pytest.mark.parametrize(
    ("text", "told"),
    [
        (
            "I prefer short answers with an example, so can you explain recursion?",
            "Ana prefers short answers with an example.",
        ),
        (
            "I'm new to chess and I'd like slow games - how do I find a club?",
            "Ana is new to chess and Ana would like slow games.",
        ),
        (
            "We love quiet places; where should we go in May?",
            "Ana and others love quiet places.",
        ),
    ],
)
def test_a_preference_said_before_a_question_is_kept(text: str, told: str) -> None:
    rec = one("Ana", text)
    assert (rec.semantic_text, rec.memory_type, rec.evidence) == (
        told,
        MemoryType.preference,
        ["D1:1"],
    )


@pytest.mark.parametrize(
    "text",
    [
        "I went to Lisbon last week, have you been?",  # a statement, not what Ana prefers
        "Can you explain recursion, so I can finish the parser I love?",  # it asks first
        "Do you prefer tea, or would you rather have coffee?",
        "Is it true that I hate mornings, or was it you?",
    ],
)
def test_a_question_that_states_no_preference_first_makes_no_record(text: str) -> None:
    assert records(("Ana", text)) == []


@pytest.mark.parametrize(
    ("text", "told"),
    [
        (
            "Which should I start with, given my progress as a 38-year-old baker from Lyon?",
            "Ana is a 38-year-old baker from Lyon.",
        ),
        ("I work as a nurse, so how should I plan my shifts?", "Ana is a nurse."),
        (
            "How do I fit evening choir practice around my career as a ferry pilot?",
            "Ana is a ferry pilot.",
        ),
    ],
)
def test_who_a_question_says_its_speaker_is_is_kept(text: str, told: str) -> None:
    rec = one("Ana", text)
    assert (rec.semantic_text, rec.memory_type, rec.evidence) == (
        told,
        MemoryType.fact,
        ["D1:1"],
    )


def test_who_a_long_statement_says_its_speaker_is_is_kept_alone_too() -> None:
    long = (
        "I have to choose between dice and coin problems to learn the basics of chance, which "
        "would be a good fit for my career as a 38-year-old baker from Lyon."
    )
    assert [r.semantic_text for r in records(("Ana", long))] == [
        long.replace("I have", "Ana has").replace("my career", "Ana's career"),
        "Ana is a 38-year-old baker from Lyon.",
    ]
    assert [r.semantic_text for r in records(("Ana", "I work as a nurse in Porto."))] == [
        "Ana works as a nurse in Porto."
    ]


@pytest.mark.parametrize(
    "text",
    [
        "Should I save my work as a PDF?",  # a thing kept as a kind, not who Ana is
        "I'm using it as a cache, is that ok?",
        "Can you explain my reading of interest as a fee?",
        "As a result, what should I do next?",
    ],
)
def test_a_question_that_says_no_role_of_its_speaker_makes_no_record(text: str) -> None:
    assert records(("Ana", text)) == []


def test_short_sentences_with_a_name_or_number_are_kept() -> None:
    recs = records(("Ana", "Hey Bruno, I adopted a puppy! Got 2 cats. Visited Lisbon. Nice."))
    assert [r.semantic_text for r in recs] == [
        "Ana adopted a puppy!",
        "Got 2 cats.",
        "Visited Lisbon.",
    ]
    assert recs[0].entities == ["Ana"]


@pytest.mark.parametrize(
    ("text", "told"),
    [
        ("I'm vegetarian.", ["Ana is vegetarian."]),
        ("I'm a nurse.", ["Ana is a nurse."]),
        ("I am left-handed.", ["Ana is left-handed."]),
        ("I'm fine.", []),  # how the speaker is at the moment, not who
        ("I'm in!", []),
        ("I'm lost.", []),
        ("I'm so tired.", []),
        ("I'm not.", []),  # says nothing of the speaker
        ("I'm hungry.", []),
    ],
)
def test_a_short_sentence_saying_who_the_speaker_is_is_kept(text: str, told: list[str]) -> None:
    assert [r.semantic_text for r in records(("Ana", text))] == told


def test_sentences_do_not_split_after_initials_or_titles() -> None:
    recs = records(("Ana", "I read a novel by J.K. Morrow. Dr. Reyes liked it too."))
    assert [r.semantic_text for r in recs] == [
        "Ana read a novel by J.K. Morrow.",
        "Dr. Reyes liked it too.",
    ]
    assert [r.entities for r in recs] == [["Ana", "J.K. Morrow"], ["Ana", "Dr. Reyes"]]


def test_an_image_caption_becomes_its_own_record() -> None:
    seg = segment(("Ana", "I went to the beach."), caption="a photo of a dog on the sand")
    texts = [r.semantic_text for r in encode_extractive(seg).records]
    assert texts == ["Ana went to the beach.", "Ana shared an image of a dog on the sand."]
    # only a real caption is an image: the same words typed in a message stay words
    typed = segment(("Ana", "I went to the beach. [image: a photo of a dog on the sand]"))
    assert not any("shared an image" in r.semantic_text for r in encode_extractive(typed).records)


def test_evidence_role_and_provenance() -> None:
    recs = records(
        ("Ana", "I keep bees in the garden."),
        (None, "I'd recommend a veil for beekeeping.", Role.assistant),
    )
    assert [r.evidence for r in recs] == [["D1:1"], ["D1:2"]]
    assert [r.source_role for r in recs] == ["user", "assistant"]
    assert all(
        (r.namespace, r.segment_id, r.source_session, r.created_at) == ("ns", "ns/s1/0", "s1", DATE)
        for r in recs
    )


def test_a_repeated_sentence_is_one_record_with_merged_evidence() -> None:
    recs = records(
        ("Ana", "The museum closes at noon."),
        ("Bruno", "Sure."),
        ("Ana", "The museum closes at noon."),
    )
    assert len(recs) == 1
    assert recs[0].evidence == ["D1:1", "D1:3"]


def test_output_envelope_and_determinism() -> None:
    seg = segment(
        ("Ana", "I adopted a puppy yesterday. My sister helped me pick him."),
        ("Bruno", 'I read "The Quiet Orchard" last month and loved it.'),
    )
    first, second = encode_extractive(seg), encode_extractive(seg, "earlier notes")
    assert first == second
    assert [r.model_dump_json() for r in first.records] == [
        r.model_dump_json() for r in second.records
    ]
    assert first.encoder == "extractive"
    assert first.usage == TokenUsage()
    assert first.disambiguation_context == "Speakers: Ana, Bruno. Session date: 2023-05-08."
    assert [r.normalized_text for r in first.records] == [
        "event: Ana adopted a puppy on 7 May 2023.",
        "fact: Ana's sister helped Ana pick him.",
        'preference: Bruno read "The Quiet Orchard" in April 2023 and loved it.',
    ]


def test_we_with_two_speakers_is_both_of_them() -> None:
    recs = records(
        ("Ana", "We signed up for the harbour swim together."),
        ("Bruno", "Our coach says we're ready."),
    )
    assert [r.semantic_text for r in recs] == [
        "Ana and Bruno signed up for the harbour swim together.",
        "Bruno and Ana's coach says Bruno and Ana are ready.",
    ]


def test_we_is_the_companion_the_turn_names() -> None:
    recs = records(
        ("Bruno", "Are you going to Oslo with your brother Kai?"),
        ("Ana", "Yes, just Kai and me. We rented a cabin by the fjord for a week."),
    )
    assert [r.semantic_text for r in recs] == [
        "Just Kai and Ana.",
        "Ana and Kai rented a cabin by the fjord for a week.",
    ]


def test_a_users_we_with_an_assistant_is_their_own_side() -> None:
    recs = records(
        ("Ana", "We run the ferry timetable service on two servers.", Role.user),
        ("Helper", "Two servers are plenty for a timetable service.", Role.assistant),
        ("Ana", "Our booking API allows 5 requests per second.", Role.user),
    )
    assert [r.semantic_text for r in recs] == [
        "Ana and others run the ferry timetable service on two servers.",
        "Ana's booking API allows 5 requests per second.",
    ]


def test_a_place_before_and_i_is_no_companion() -> None:
    recs = records(
        ("Ana", "I live in Bergen and I work at the harbour office. We bought a boat."),
        ("Bruno", "Nice."),
    )
    assert recs[0].semantic_text.startswith("Ana lives in Bergen and Ana works")
    assert recs[-1].semantic_text == "Ana and Bruno bought a boat."
    (rec,) = records(
        ("Ana", "This boat is for Kai and me. We sail it on Sundays."), ("Bruno", "Nice.")
    )[1:2]
    assert rec.semantic_text == "Ana and Kai sail it on Sundays."


def test_you_is_the_other_speaker() -> None:
    recs = records(
        ("Ana", "You should try the rye loaf at Hollis Bakery."),
        ("Bruno", "Your tip about the ferry saved me an hour."),
    )
    assert [r.semantic_text for r in recs] == [
        "Bruno should try the rye loaf at Hollis Bakery.",
        "Ana's tip about the ferry saved Bruno an hour.",
    ]


def test_you_without_a_known_addressee_stays() -> None:
    recs = records(("Ana", "You never know what the tide brings in."))
    assert [r.semantic_text for r in recs] == ["You never know what the tide brings in."]


def test_a_plural_you_is_the_other_speakers() -> None:
    recs = records(
        ("Ana", "You guys should come to the harbour swim."),
        ("Bruno", "Both of you inspire me to train harder."),
        ("Cleo", "You two always pick the coldest water."),
    )
    assert [r.semantic_text for r in recs] == [
        "Bruno and Cleo should come to the harbour swim.",
        "Ana and Cleo inspire Bruno to train harder.",
        "Ana and Bruno always pick the coldest water.",
    ]
    two = records(
        ("Ana", "Nice swim today."),
        ("Bruno", "You all did great in the race. I'll tell you all about mine tomorrow."),
    )
    assert [r.semantic_text for r in two] == [
        "Ana and others did great in the race.",
        "Bruno will tell Ana all about Bruno's on 9 May 2023.",
    ]


def test_a_reflexive_stays_a_reflexive_unless_joined_to_a_name() -> None:
    recs = records(
        ("Ana", "I built the boat shed myself and taught myself to sail."),
        ("Bruno", "You should be proud of yourself; we painted ours ourselves."),
        ("Ana", "Kai and myself will race it in June."),
    )
    assert [r.semantic_text for r in recs] == [
        "Ana built the boat shed themself and taught themself to sail.",
        "Ana should be proud of themself; Bruno and Ana painted Bruno and Ana's themselves.",
        "Kai and Ana will race it in June.",
    ]


def test_context_carries_the_subject_the_turn_before_names() -> None:
    recs = records(
        ("Bruno", "Are you going to Oslo with your brother Kai?"),
        ("Ana", "Yes, just Kai and me. We rented a cabin by the fjord for a week."),
    )
    cabin = recs[-1]
    assert "Oslo" in cabin.context and "Oslo" not in cabin.semantic_text
    assert cabin.search_text() == f"{cabin.normalized_text} (context: {cabin.context})"
    # the question's words are the context too; the answer's own words are not repeated
    assert "brother" in cabin.context.split(", ") and "Kai" not in cabin.context


def test_a_name_called_at_either_end_does_not_hide_what_the_sentence_says() -> None:
    recs = records(("Ana", "Lea, I painted a lake. It's in the heart of Lisbon, Portugal."))
    assert [r.semantic_text for r in recs] == [
        "Lea, Ana painted a lake.",
        "It's in the heart of Lisbon, Portugal.",
    ]


def test_a_called_name_the_record_says_again_is_dropped_and_the_only_one_is_kept() -> None:
    recs = records(
        (
            "Ana",
            "Bruno, you are doing great. Bruno, sounds like the parade was a great experience!",
        ),
        ("Bruno", "That was tough for me, Ana."),
    )
    assert [r.semantic_text for r in recs] == [
        "Bruno is doing great.",
        "Bruno, sounds like the parade was a great experience!",
        "That was tough for Bruno, Ana.",
    ]


def test_a_third_person_pronoun_gets_the_name_of_the_sentence_before_as_context() -> None:
    recs = records(
        ("Bruno", "How was the trip?"),
        ("Ana", "Long. And Biscuit survived! Mrs. Lee walked him every day. The cabin was cold."),
    )
    walked, cabin = recs[-2], recs[-1]
    assert walked.semantic_text == "Mrs. Lee walked him every day."
    assert walked.context.split(", ")[0] == "Biscuit"
    assert "Biscuit" not in cabin.context  # no pronoun to stand for it


def test_context_is_empty_when_the_neighbours_name_nothing_new() -> None:
    recs = records(
        ("Ana", "Bruno bought a kayak in Bergen."),
        ("Bruno", "The kayak from Bergen is bright red."),
    )
    assert [r.context for r in recs] == ["", ""]


@pytest.mark.parametrize(
    "text", ["Ha, no backing out now.", "Lisbon!", "Wow, what a day that was!", "Noted."]
)
def test_acknowledgements_and_exclamations_make_no_record(text: str) -> None:
    recs = records(("Ana", text), ("Bruno", "Bruno grows tomatoes on the balcony."))
    assert [r.evidence for r in recs] == [["D1:2"]]


def test_an_assistant_turn_keeps_what_it_recommends_or_promises_not_its_explanation() -> None:
    reply = (
        "Great question! Beekeeping needs a calm and steady hand.\n\n"
        "## Step 1: Gear\n"
        "Bees defend their hive when they sense a threat nearby.\n"
        "- You should wear a veil on your first inspections.\n"
        "- A smoker calms the colony before the hive is opened.\n\n"
        "Here is a checklist:\n\n"
        "```text\nveil gloves smoker hive tool\n```\n"
        "I'll send you a guide to spring inspections tomorrow.\n"
        "Given the wasps, I now recommend the **Warré hive** over the Langstroth."
    )
    recs = records(("Ana", "I keep bees in the garden."), (None, reply, Role.assistant))
    said = [r.semantic_text for r in recs if r.source_role == "assistant"]
    assert said == [
        "Ana should wear a veil on Ana's first inspections.",
        "The assistant will send Ana a guide to spring inspections on 9 May 2023.",
        "Given the wasps, the assistant now recommends the Warré hive over the Langstroth.",
    ]


def test_an_assistant_sentence_that_points_at_what_follows_or_hands_back_is_no_record() -> None:
    """ "Here's what I recommend." says nothing the list after it does not; "Let me know ..."
    asks the user; a recommendation in strong emphasis is kept without the markdown."""
    reply = (
        "Here's what I recommend.\n\n"
        "- **I recommend starting with SQLite** for the first release.\n"
        "- Keep the schema in one migration file.\n\n"
        "Below is the retry scheme I would suggest.\n\n"
        "| error | retry |\n|---|---|\n| 5xx | yes |\n\n"
        "Let me know which channel you want first, and I'll draft it."
    )
    recs = records(("Ana", "I keep bees in the garden."), (None, reply, Role.assistant))
    said = [r.semantic_text for r in recs if r.source_role == "assistant"]
    assert said == ["The assistant recommends starting with SQLite for the first release."]


@pytest.mark.parametrize(
    "said",
    [
        "Let's put the launch on March 3.",
        "Let's try the Thursday slot instead.",
        "Here is the plan we agreed on: the launch moves to March 3.",
        "The following week I'll send you the draft.",
    ],
)
def test_an_assistant_decision_that_begins_like_pacing_or_an_announcement_is_kept(
    said: str,
) -> None:
    recs = records(("Ana", "I keep bees in the garden."), (None, said, Role.assistant))
    assert [r.source_role for r in recs] == ["user", "assistant"]


def test_a_power_or_a_dunder_name_is_not_emphasis() -> None:
    said = "My key space is 2**64 and the config lives in __init__.py for now."
    (rec,) = records(("Ana", said))
    assert "2**64" in rec.semantic_text and "__init__.py" in rec.semantic_text


def test_code_tables_and_headings_are_never_records() -> None:
    message = (
        "## My setup\n"
        "I deployed the tracker on a small server at home.\n\n"
        "| host | port |\n|---|---|\n| nas | 8080 |\n\n"
        "```python\napp.run(host='0.0.0.0', port=8080)\n```"
    )
    texts = [r.semantic_text for r in records(("Ana", message))]
    assert texts == ["Ana deployed the tracker on a small server at home."]


def test_a_standing_instruction_is_a_constraint() -> None:
    recs = records(
        ("Ana", "Always answer with a shell one-liner first when I ask about file operations."),
        ("Ana", "Never use tabs in my code."),
        ("Ana", "I always walk the dog at seven."),
        ("Ana", "Some standing instructions: always answer in British English."),
        ("Ana", "My rule at home: the dog never sleeps upstairs."),
        ("Ana", "Update: never had a cavity in my life."),
        ("Ana", "Ps: always forget my keys on Mondays."),
        ("Ana", "Never mind, the build works now."),
        ("Ana", "When I ask you about file operations, always answer with a one-liner."),
        ("Ana", "When I ask my landlord about repairs, he never answers."),
        ("Ana", "When I ask for a refund, keep getting transferred."),
        ("Ana", "Please answer in Portuguese from now on when I ask about Porto."),
        ("Ana", "I will use the bus from now on."),
    )
    assert [r.memory_type for r in recs] == [
        MemoryType.constraint,
        MemoryType.constraint,
        MemoryType.fact,
        MemoryType.constraint,  # after a label
        MemoryType.fact,
        MemoryType.fact,  # a label that says no instruction
        MemoryType.fact,
        MemoryType.fact,
        MemoryType.constraint,  # its scope said first
        MemoryType.fact,
        MemoryType.fact,
        MemoryType.constraint,  # asked for from now on, said after what
        MemoryType.fact,  # the speaker's own plan
    ]


def test_a_label_longer_than_a_record_holds_is_dropped_and_the_statement_kept() -> None:
    """A pasted sequence or a heading of forty capitalized words is no name or topic: it
    leaves the record's labels, and the record and its neighbours are still written (before,
    the record broke its contract and the whole segment was dead-lettered)."""
    dna = "ACGT" * 60
    heading = " ".join(["Quarterly Planning Meeting For The Northern Region"] * 5)
    recs = records(
        ("Ana", f"I am a biologist in Porto and my favourite primer is {dna.lower()} for now."),
        ("Ana", f"I am organising the {heading} next week."),
        ("Ana", "My sister lives in Lisbon."),
    )
    assert len(recs) == 3
    labels = [label for r in recs for label in [*r.entities, *r.tags]]
    assert labels and all(len(label) <= 200 for label in labels)
    assert "Porto" in recs[0].entities and "Lisbon" in recs[2].entities


def test_a_day_something_is_set_for_is_ahead_and_a_short_dated_statement_is_kept() -> None:
    """Said on Monday 8 May 2023: "is on Friday" is the coming Friday, not the last one; "The
    demo day is next Friday." (next week's) has one content word, and its date makes it a
    statement."""
    (set_for,) = records(("Ana", "The team standup is on Friday."))
    assert set_for.semantic_text == "The team standup is on 12 May 2023."
    (went,) = records(("Ana", "We went hiking on Friday."))
    assert went.temporal.t_ref == "2023-05-05"
    (demo,) = records(("Ana", "The demo day is next Friday."))
    assert demo.temporal.t_ref == "2023-05-19"


def test_a_turn_that_is_not_memory_makes_no_record() -> None:
    seg = segment(("Ann", "I adopted a cat named Miso."), ("Ann", "I bought a red kayak."))
    first = seg.exchanges[0]
    kept = first.model_copy(update={"turns": [first.turns[0].model_copy(update={"memory": False})]})
    seg = seg.model_copy(update={"exchanges": [kept, *seg.exchanges[1:]]})
    assert [r.semantic_text for r in encode_extractive(seg).records] == ["Ann bought a red kayak."]
