"""The words the heuristics know: calendar names and the stopword lists, one home each.

The three stopword lists serve three different purposes and are kept apart on purpose:
merging them changes which words the extractive encoder keeps as tags, which words the
heuristic planner keeps in its queries and how similar two evidence items look to the
diversity-aware selection, so every measured figure would move.
"""

from __future__ import annotations


def wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
# Counts written as words ("two weeks ago", "a week before"), up to twelve.
NUMBER_WORDS: dict[str, int] = {"a": 1, "an": 1} | {
    w: i
    for i, w in enumerate(
        [
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
        ],
        1,
    )
}

# Month names and their abbreviations (lower case, no dot) -> month number.
MONTH_NUMBERS: dict[str, int] = {
    name: n
    for n, full in enumerate(MONTHS, 1)
    for name in {full.lower(), full.lower()[:3], *(("sept",) if n == 9 else ())}
}

# A month name or abbreviation in text, with an optional dot ("Sept.", "march").
MONTH_PATTERN = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)


def month_number(name: str | None) -> int | None:
    """1-12 for a month name or abbreviation in any case, with or without a dot."""
    return MONTH_NUMBERS.get(name.rstrip(".").lower()) if name else None


# -- questions (heuristic planner): what is not worth searching for ---------------------------

QUESTION_WORDS = wordset("what when where who whom whose which why how")
AUXILIARIES = wordset(
    "do does did is are was were am be been being has have had will would can could should "
    "shall may might must"
)
QUESTION_STOPWORDS = (
    QUESTION_WORDS
    | AUXILIARIES
    | wordset(
        """a an the and or but nor of to in on at for from with without by about as into onto
    over under than then that this these those there here it its i me my mine we us our ours
    you your yours he him his she her hers they them their theirs not no yes any some ever
    also just very so too if whether ago long many much often time times first last next
    previous both all each every either neither other another more most less least between
    before after since until during while again please tell remind know say said s up out
    one ones thing things kind kinds type types"""
    )
)

# -- conversation turns (extractive encoder): words that never make a topic tag -------------

TAG_STOPWORDS = wordset(
    "that this with have from they them their there what when were been will would could should "
    "about just really also some very much more like know think going into your yours than then "
    "these those only even well because which while where here doing being does things thing "
    "something anything everything always never still such over after before again other "
    "others each most many sure yeah thanks great awesome amazing glad haha cause though "
    "through gonna wanna didn doesn wasn couldn wouldn shouldn haven hasn aren weren isn "
    "love feel want make made time good lots pretty totally definitely super kind keep "
    "right said says getting maybe actually probably especially another every nice cool "
    "wonderful today tomorrow yesterday tonight week weeks month months year years days "
    "last next ago hope take took come came back around whole since until image shared "
    "photo picture someone thank ours mine myself"
)

# -- evidence texts (selection): words that do not make two items look alike ----------------

SIMILARITY_STOPWORDS = wordset(
    "a an the and or but if of to in on at by for with from as is are was were be been being "
    "it its this that these those i me my we our you your he him his she her they them their "
    "do does did have has had not no so than then there here what when where which who how "
    "about into over just also very can will would could should"
)
