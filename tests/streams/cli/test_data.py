"""The `lychee` commands a user types, against the test stack."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streams.stack.embedded import Stack

pytestmark = pytest.mark.integration

DEMO = Path(__file__).resolve().parents[3] / "deploy" / "demo" / "conversation.jsonl"


def lychee(stack: Stack, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **stack.env(), "LYCHEE_LOG_LEVEL": "WARNING"}
    return subprocess.run(
        [sys.executable, "-m", "streams.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_cli_ingest_wait_then_ask_json_and_status(stack: Stack) -> None:
    out = lychee(
        stack, "ingest", str(DEMO), "--format", "jsonl", "--namespace", "cli-demo", "--wait"
    )
    assert out.returncode == 0, out.stderr
    assert "produced 28 exchanges (28 turns) in 1 namespace, 2 sessions" in out.stdout
    # stderr is no terminal here: no bar's first frame left in it, unended, before what follows
    assert "ingest:" not in out.stderr and "0/28" not in out.stderr, repr(out.stderr)
    assert "had no date" not in out.stderr  # every demo line has its session_date
    ask = lychee(
        stack, "ask", "--namespace", "cli-demo", "sourdough starter name", "-k", "3", "--json"
    )
    assert ask.returncode == 0, ask.stderr
    reply = json.loads(ask.stdout)
    assert reply["status"] == "ok" and len(reply["evidence"]) == 3
    assert all(e["turn_ids"] for e in reply["evidence"])
    assert all(e["speaker"] for e in reply["evidence"] if e["kind"] == "turn")
    assert (
        reply["context"].startswith("Episodic/Semantic Memories:") and reply["context_tokens"] > 0
    )
    small = lychee(
        stack,
        *("ask", "--namespace", "cli-demo", "sourdough starter name", "-k", "3", "--json"),
        *("--token-budget", str(reply["context_tokens"] - 1)),
    )
    assert small.returncode == 0, small.stderr
    cut = json.loads(small.stdout)
    assert cut["context_tokens"] < reply["context_tokens"]
    kept = [e for e in reply["evidence"] if e in cut["evidence"]]
    assert cut["evidence"] == kept != reply["evidence"]  # a part of the reply, in its order
    refused = lychee(stack, "ask", "--namespace", "cli-demo", "x", "--token-budget", "5")
    assert refused.returncode == 2 and "--token-budget" in refused.stderr, refused.stderr
    # the README's question: the record naming the race, then the one saying when it is
    when = lychee(stack, "ask", "--namespace", "cli-demo", "When is the half marathon?", "-k", "3")
    assert when.returncode == 0, when.stderr
    assert "May 19th" in when.stdout, when.stdout
    assert reply["plan"]["routes"]
    status = lychee(stack, "status", "--json")
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    stages = {row["stage"]: row for row in report["stages"]}
    assert stages["segmenter"]["lag"] == 0 and stages["indexer"]["lag"] == 0
    assert report["rows"]["turns"] >= 28
    plain = lychee(stack, "status")  # the test's stack is no `lychee up`: said, not left out
    assert plain.returncode == 0, plain.stderr
    assert "workers: no lychee up of this broker" in plain.stdout, plain.stdout


def test_cli_bad_input_file_is_a_clear_error(stack: Stack, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"namespace": "n", "session_id": "s", "turns": []}\n')
    out = lychee(stack, "ingest", str(bad), "--format", "jsonl")
    assert out.returncode != 0
    assert "bad.jsonl:1" in out.stderr and "turns" in out.stderr


def test_cli_ingest_names_a_message_over_the_contract_and_ingests_the_rest(
    stack: Stack, tmp_path: Path
) -> None:
    from tests.streams.test_pipeline import store

    ns = f"cli-long-{os.getpid()}"
    texts = ["I planted tulips.", "x" * 200_001, "The tulips are red."]
    path = _lines_file(tmp_path / "long.jsonl", texts)
    out = lychee(stack, "ingest", str(path), "--format", "jsonl", "--namespace", ns, "--wait")
    assert out.returncode == 1, out.stderr  # a script sees that not everything was taken
    assert "produced 2 exchanges (2 turns)" in out.stdout and "1 skipped" in out.stdout
    assert "1 message of" in out.stderr and "refused (named above) and NOT produced" in out.stderr
    assert (
        f"skipped {path}:2: namespace {ns}, session s: "
        "turns.0.content: 200,001 characters, at most 200,000"
    ) in out.stderr.splitlines()
    assert "1 message skipped" in out.stderr and "Traceback" not in out.stderr
    assert store(stack).count("turns", ns) == 2
    # again: the rest is all taken before, the refused line still not: 1 all the same
    again = lychee(stack, "ingest", str(path), "--format", "jsonl", "--namespace", ns)
    assert again.returncode == 1 and "nothing new" in again.stdout, again.stderr
    assert "refused (named above) and NOT produced" in again.stderr
    # each turn within the contract, the exchange over the stages' message limit: skipped
    # and named before anything is sent, not dead-lettered after "indexed"
    wide = tmp_path / "wide.jsonl"
    turns = [{"role": "user", "content": "w" * 199_999}] * 6
    wide.write_text(json.dumps({"session_id": "w", "turns": turns}) + "\n")
    out = lychee(stack, "ingest", str(wide), "--format", "jsonl", "--namespace", ns, "--wait")
    assert out.returncode == 1 and "LYCHEE_MAX_MESSAGE_BYTES" in out.stderr, out.stderr
    assert f"skipped {wide}: namespace {ns}, session w: exchange " in out.stderr
    # nothing left to ingest: an error, and nothing is sent
    only = _lines_file(tmp_path / "only.jsonl", ["y" * 200_001])
    out = lychee(stack, "ingest", str(only), "--format", "jsonl", "--namespace", ns)
    assert out.returncode == 1 and "nothing ingested" in out.stderr
    assert f"skipped {only}:1:" in out.stderr


def test_cli_ingest_without_pasted_exports_warns_once_and_works(stack: Stack) -> None:
    env = {k: v for k, v in stack.env().items() if k != "LYCHEE_KAFKA_IDEMPOTENCE"}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "streams.cli",
            "ingest",
            str(DEMO),
            "--format",
            "jsonl",
            "--namespace",
            "cli-noexport",
        ],
        env={
            **{k: v for k, v in os.environ.items() if k != "LYCHEE_KAFKA_IDEMPOTENCE"},
            **env,
            "LYCHEE_LOG_LEVEL": "WARNING",
        },
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "produced 28 exchanges" in out.stdout
    assert out.stderr.count("idempotence_off") == 1
    assert "Traceback" not in out.stderr
    assert out.stderr.count("UnknownError") == 1  # named once, in the warning


@pytest.mark.parametrize(
    "args",
    [
        ("ingest", str(DEMO), "--format", "jsonl"),
        ("ask", "--namespace", "n", "anything?"),
        ("status",),
    ],
)
def test_cli_unreachable_broker_is_a_one_line_error_with_exit_code_3(args: tuple[str, ...]) -> None:
    from streams.stack.embedded import free_port

    env = {
        **os.environ,
        "LYCHEE_KAFKA_BOOTSTRAP": f"127.0.0.1:{free_port()}",
        "LYCHEE_REQUEST_TIMEOUT_S": "5",
        "LYCHEE_LOG_LEVEL": "WARNING",
    }
    out = subprocess.run(
        [sys.executable, "-m", "streams.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 3, out.stderr
    assert "Traceback" not in out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "cannot reach Kafka" in errors[0]


def _lines_file(path: Path, texts: list[str], seqs: list[int] | None = None) -> Path:
    rows = []
    for i, text in enumerate(texts):
        row: dict[str, object] = {
            "session_id": "s",
            "turns": [{"role": "user", "speaker": "Odile", "content": text}],
        }
        if seqs is not None:
            row["seq"] = seqs[i]
        rows.append(json.dumps(row))
    path.write_text("\n".join(rows) + "\n")
    return path


def test_cli_ingest_second_jsonl_file_continues_the_session(stack: Stack, tmp_path: Path) -> None:
    from tests.streams.test_pipeline import store

    ns = f"cli-cont-{os.getpid()}"
    first = _lines_file(tmp_path / "a.jsonl", ["I planted tulips.", "The tulips are red."])
    second = _lines_file(tmp_path / "b.jsonl", ["Kasimir brought plum jam.", "The jam is gone."])
    for path in (first, second):
        out = lychee(stack, "ingest", str(path), "--format", "jsonl", "--namespace", ns, "--wait")
        assert out.returncode == 0, out.stderr
        assert "produced 2 exchanges" in out.stdout and "indexed" in out.stdout
        assert f"note: 2 exchanges of {path} had no date" in out.stderr  # the lines say none
    assert store(stack).count("turns", ns) == 4  # the second file was not fenced as replays
    again = lychee(stack, "ingest", str(second), "--format", "jsonl", "--namespace", ns, "--wait")
    assert again.returncode == 0, again.stderr
    assert f"nothing new: all 2 exchanges of {second} were accepted before" in again.stdout
    more = _lines_file(tmp_path / "d.jsonl", ["Kasimir brought plum jam.", "Odile ate it."])
    out = lychee(stack, "ingest", str(more), "--format", "jsonl", "--namespace", ns, "--wait")
    assert out.returncode == 0, out.stderr
    assert (
        "produced 1 exchange (1 turn) in 1 namespace, 1 session, 1 already accepted" in out.stdout
    )
    stale = _lines_file(tmp_path / "c.jsonl", ["An old line."], seqs=[1])
    out = lychee(stack, "ingest", str(stale), "--format", "jsonl", "--namespace", ns, "--wait")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "seq must be above 4" in out.stderr
    assert store(stack).count("turns", ns) == 5


def test_cli_records_lists_pages_then_forget_yes_prints_receipt(stack: Stack) -> None:
    ns = "cli-forget"
    out = lychee(
        stack, "ingest", str(DEMO), "--format", "jsonl", "--namespace", ns, "--wait", timeout=600
    )
    assert out.returncode == 0, out.stderr
    recs = lychee(stack, "records", ns, "--page-size", "5", "--json")
    assert recs.returncode == 0, recs.stderr
    page = json.loads(recs.stdout)
    assert page["total"] > 5 and len(page["items"]) == 5 and page["pages"] >= 2
    bogus = lychee(stack, "records", ns, "--type", "bogus")
    assert bogus.returncode == 2 and "'bogus' is not one of 'fact', 'preference'" in bogus.stderr
    turns = lychee(stack, "records", ns, "--turns", "--page", "2", "--page-size", "20")
    assert turns.returncode == 0, turns.stderr
    assert "page 2/2, 28 turns" in turns.stdout
    past = lychee(stack, "records", ns, "--turns", "--page", "9", "--page-size", "20")
    assert "page 9 is past the last (2)" in past.stderr, past.stderr
    held = lychee(stack, "records", ns, "--history", "--record", page["items"][0]["id"])
    assert held.returncode == 0 and "supersessions" in held.stdout, held.stderr
    missing = lychee(stack, "records", ns, "--history", "--record", "bogus")
    assert missing.returncode == 1 and missing.stdout == "", missing.stdout
    assert missing.stderr.strip() == f"Error: no record bogus in namespace {ns}", missing.stderr
    refused = lychee(stack, "forget", ns)
    assert refused.returncode == 2 and "--yes" in refused.stderr
    done = lychee(stack, "forget", ns, "--yes", "--json")
    assert done.returncode == 0, done.stderr
    receipt = json.loads(done.stdout)
    assert receipt["rows_removed"]["turns"] == 28
    assert receipt["rows_removed"]["records"] == page["total"]
    assert set(receipt["stages"]) == {"segmenter", "encoder", "indexer"}
    after = lychee(stack, "records", ns, "--json")
    assert json.loads(after.stdout)["total"] == 0
    listed = lychee(stack, "records", ns)
    assert f"no records in namespace {ns}" in listed.stderr, listed.stderr
    again = lychee(stack, "forget", ns, "--yes")
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[-1] == f"nothing was stored for {ns}", again.stdout


def test_cli_a_name_the_contract_refuses_is_named_once(stack: Stack) -> None:
    out = lychee(stack, "forget", "../bad", "--yes", timeout=60)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    [line] = [x for x in out.stderr.splitlines() if x.startswith("Error:")]
    assert line.count("(got '../bad')") == 1, line


def test_cli_prints_stored_control_characters_as_escapes(stack: Stack, tmp_path: Path) -> None:
    """A turn anyone may write holds terminal commands (a title, a link): the listing shows
    them and the operator's terminal does not obey them; JSON keeps the text as stored."""
    ns = "cli-escapes"
    said = "Ivo keeps bees \x1b]0;owned\x07 on the roof \x1b[2J\x9b1m"
    line = {"namespace": ns, "session_id": "a", "turns": [{"role": "user", "content": said}]}
    path = tmp_path / "escapes.jsonl"
    path.write_text(json.dumps(line) + "\n")
    out = lychee(stack, "ingest", str(path), "--format", "jsonl", "--wait")
    assert out.returncode == 0, out.stderr
    listed = lychee(stack, "records", ns, "--turns")
    assert listed.returncode == 0, listed.stderr
    assert not {"\x1b", "\x07", "\x9b"} & set(listed.stdout), listed.stdout
    assert "bees \\x1b]0;owned\\x07 on the roof \\x1b[2J\\x9b1m" in listed.stdout
    raw = json.loads(lychee(stack, "records", ns, "--turns", "--json").stdout)
    assert said in raw["items"][0]["text"]
