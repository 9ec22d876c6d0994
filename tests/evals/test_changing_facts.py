"""Facts that change, end to end in one process: a made-up agent conversation through the
segmenter's policy, the extractive encoder, the indexer and the query service (the recall
probe's path), asked what holds now."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import lancedb

from tests.evals.recall_probe import run


def _reply(title: str, steps: list[str]) -> str:
    lines = [f"Sure, here is how I would approach {title}.", f"### {title.capitalize()}"]
    return "\n".join([*lines, *(f"- {s}" for s in steps)])


SESSIONS = [
    (
        "10:00 AM on 1 March, 2024",
        [
            "Hi, I'm Noor. I live in Ghent and I work as a data engineer at a small bakery chain.",
            _reply("the first month", ["Map the pipelines.", "Set up alerts for the loads."]),
            "Our API is written in Flask and we deploy it on Heroku.",
            _reply("a Flask API on Heroku", ["Use blueprints.", "Keep config in the env."]),
            "Tomas handles the deployments, and the launch is planned for June 3.",
            _reply("the launch", ["Freeze features early.", "Agree a rollback plan."]),
            "Our cloud budget is $400 a month.",
            "With $400 a month you can run two small instances and a managed database.",
            "My home server runs Ubuntu 22.04 and has 32 GB of RAM.",
            "That is plenty for a few containers and a local database.",
            "I work at Brightloaf, the bakery chain, on their data team.",
            "Then the data team can own the launch's dashboards.",
        ],
    ),
    (
        "10:00 AM on 10 May, 2024",
        [
            "Big news: I moved to Antwerp last week, the new flat is near the river.",
            _reply("settling in after the move", ["Update your address.", "Find a desk."]),
            "We switched from Flask to FastAPI for the API, it was worth it.",
            _reply("moving to FastAPI", ["Port one router at a time.", "Use Pydantic models."]),
            "Also the launch slipped to July 15 because of the payment provider.",
            "Understood, July 15 it is: time for a load test of the payment flow.",
        ],
    ),
    (
        "10:00 AM on 2 August, 2024",
        [
            "We moved off Heroku last month.",
            _reply("the new host", ["Define the app.", "Set the secrets."]),
            "Finance cut our cloud budget to $300 a month.",
            "With $300 a month, drop the staging database first.",
            "I upgraded the home server: it now has 64 GB of RAM.",
            "With 64 GB you can keep the test database in memory.",
            "I now work at Kelpworks, a robotics startup.",
            "Congratulations on the new job at Kelpworks!",
        ],
    ),
]
QUESTIONS = {
    "Where do I live?": "D2:1",
    "When is the launch?": "D2:5",
    "What is our cloud budget?": "D3:3",
    "How much RAM does my home server have?": "D3:5",
    # one statement gave two values and a later one changed the other
    "Which Ubuntu version is on my home server?": "D1:9",
    # no change verb: "now" says the employer changed
    "Where do I work?": "D3:7",
}


def _write(path: Path) -> None:
    conv: dict[str, Any] = {"speaker_a": "Noor", "speaker_b": "Assistant"}
    for n, (date, texts) in enumerate(SESSIONS, 1):
        conv[f"session_{n}_date_time"] = date
        conv[f"session_{n}"] = [
            {"speaker": "Noor" if i % 2 == 0 else "Assistant", "dia_id": f"D{n}:{i + 1}", "text": t}
            for i, t in enumerate(texts)
        ]
    qa = [
        {"question": q, "answer": "", "evidence": [g], "category": 1} for q, g in QUESTIONS.items()
    ]
    path.write_text(json.dumps([{"sample_id": "noor", "conversation": conv, "qa": qa}]))


def test_what_changed_is_linked_and_comes_first(tmp_path: Path) -> None:
    data, dump = tmp_path / "chat.json", tmp_path / "dump.json"
    _write(data)
    run(data, tmp_path / "store", None, dump=dump, k=5, with_baselines=False)

    (store,) = (tmp_path / "store").iterdir()
    links = lancedb.connect(str(store)).open_table("links").to_pandas()
    assert sorted(links.reason) == [
        "Brightloaf then Kelpworks",
        "Flask then FastAPI",
        "Heroku left",
        "budget, cloud, noor: $400 then $300",
        "home, noor, ram, server: 32 GB then 64 GB",
        "launch: June 3 then July 15",
    ]
    for asked in json.loads(dump.read_text()):
        first = asked["items"][0]
        assert QUESTIONS[asked["question"]] in first["turn_ids"], (asked["question"], first)
    launch = next(a for a in json.loads(dump.read_text()) if "launch" in a["question"])
    older = next(i for i in launch["items"] if "D1:5" in i["turn_ids"])
    assert older["superseded_by"] and older["valid_to"]  # marked, and kept
    # the statement of two values, one of them changed since: named as replaced in part
    ubuntu = next(a for a in json.loads(dump.read_text()) if "Ubuntu" in a["question"])
    (compound,) = [i for i in ubuntu["items"][:1] if "D1:9" in i["turn_ids"]]
    assert compound["superseded_by"] and compound["replaced_values"] == ["32 GB"]
    assert launch["items"][0]["replaced_values"] == []
    # the date is what changed of the older message; who handles the deployments holds
    assert older["replaced_values"] == ([] if older["kind"] == "record" else ["June 3"])
