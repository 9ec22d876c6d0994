"""The root command: every group listed; `bench`, which imports the whole query path, only
when asked for, so that `lychee mcp` answers its host without waiting for it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from streams.cli import main


def test_main_help_lists_every_command_bench_included() -> None:
    out = CliRunner().invoke(main, ["--help"])
    assert out.exit_code == 0
    for name in ("up", "worker", "ingest", "ask", "gateway", "mcp", "bench"):
        assert f"\n  {name} " in out.output, name
    assert CliRunner().invoke(main, ["bench", "--help"]).exit_code == 0


def test_main_import_leaves_the_benchmarks_and_lancedb_unimported() -> None:
    code = "import sys, streams.cli; print(sorted({'streams.bench.harness', 'lancedb'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_main_a_setting_it_cannot_read_is_named_with_the_value_given_in_one_line() -> None:
    out = CliRunner().invoke(main, ["status"], env={"LYCHEE_QUERY_PROCESSES": "two"})
    assert out.exit_code == 1
    assert out.output.strip().splitlines() == [
        "Error: invalid settings or input: LYCHEE_QUERY_PROCESSES: Input should be a valid "
        "integer, unable to parse string as an integer (got 'two')"
    ]
    long = CliRunner().invoke(main, ["status"], env={"LYCHEE_QUERY_PROCESSES": "x" * 500})
    [line] = long.output.strip().splitlines()
    assert line.endswith(f"(got '{'x' * 56}...)")


def test_main_status_of_a_directory_no_lychee_up_wrote_says_so(tmp_path: Path) -> None:
    out = CliRunner().invoke(main, ["status", "--data-dir", str(tmp_path)])
    assert out.exit_code == 1
    assert f"{tmp_path} is no lychee up data directory" in out.output


def test_main_a_port_out_of_range_or_a_wait_of_nothing_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    data = tmp_path / "x.jsonl"
    data.write_text("")
    refused = {
        ("up", "--data-dir", str(tmp_path), "--kafka-port", "70000"): "'--kafka-port': 70000",
        ("up", "--data-dir", str(tmp_path), "--redis-port", "-5"): "'--redis-port': -5",
        ("up", "--data-dir", str(tmp_path), "--gateway-port", "-7"): "'--gateway-port': -7",
        ("gateway", "--port", "99999"): "'--port': 99999",
        ("ask", "--namespace", "ns", "q", "--timeout", "0"): "'--timeout': 0.0",
        ("ask", "--namespace", "ns", "q", "-k", "0"): "'-k': 0",
        ("forget", "ns", "--yes", "--timeout", "-1"): "'--timeout': -1.0",
        ("ingest", str(data), "--format", "jsonl", "--timeout", "0"): "'--timeout': 0.0",
    }
    gone = CliRunner().invoke(main, ["status", "--data-dir", str(tmp_path / "gone")])
    assert gone.exit_code == 2 and "does not exist" in gone.output, gone.output
    for args, named in refused.items():
        out = CliRunner().invoke(main, list(args))
        assert out.exit_code == 2, (args, out.output)
        assert f"Invalid value for {named} is not in the range" in out.output, out.output
    assert [p.name for p in tmp_path.iterdir()] == ["x.jsonl"]  # nothing started, nothing made


def test_main_a_name_the_service_cannot_hold_is_a_usage_error(tmp_path: Path) -> None:
    """Before anything is read or sent: not one "skipped" line per message of the file."""
    data = tmp_path / "x.jsonl"
    data.write_text('{"session_id": "s", "turns": [{"role": "user", "content": "hi"}]}\n')
    for args in (
        ("ingest", str(data), "--format", "jsonl", "--namespace", "../x"),
        ("ask", "--namespace", "../x", "q"),
        ("ask", "--namespace", "ns", "--session", "a b", "q"),
    ):
        out = CliRunner().invoke(main, list(args))
        assert out.exit_code == 2, (args, out.output)
        assert "must be 1-128 characters of ASCII letters" in out.output, out.output


def test_main_an_error_of_ours_is_its_message_without_its_class_name(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    env = {"LYCHEE_LANCEDB_URI": str(missing)}
    out = CliRunner().invoke(main, ["records", "ns"], env=env)
    assert out.exit_code == 1
    assert out.output.startswith(f"Error: no memory store at {missing}:"), out.output


def test_main_version_is_the_installed_distributions() -> None:
    from importlib.metadata import version

    out = CliRunner().invoke(main, ["--version"])
    assert (out.exit_code, out.output) == (0, f"lychee, version {version('lychee-memory')}\n")


@pytest.mark.parametrize(
    ("env", "said"),
    [
        (
            {"LYCHEE_SEGMENTER__DELTA": "7"},
            "LYCHEE_SEGMENTER__DELTA: Input should be less than or equal to 1 (got '7')",
        ),
        (
            {"LYCHEE_SEGMENTER__CALIBRATION": '{"center": 0.4, "scale": 0}'},
            "LYCHEE_SEGMENTER__CALIBRATION__SCALE: Input should be greater than 0",
        ),
        (
            {"LYCHEE_SEGMENTER__MIN_TOKENS": "5000"},
            "LYCHEE_SEGMENTER: min_tokens 5000, target_tokens 600 and max_tokens 900 must rise",
        ),
        (
            {"LYCHEE_EMBEDDING_DIM": "0"},
            "LYCHEE_EMBEDDING_DIM: Input should be greater than or equal to 1 (got '0')",
        ),
        (
            {"LYCHEE_RESTART_BACKOFF_S": "60"},
            "LYCHEE_RESTART_BACKOFF_S 60 is above LYCHEE_RESTART_BACKOFF_MAX_S 30",
        ),
    ],
)
def test_main_a_setting_out_of_its_range_is_refused_by_its_variable(
    env: dict[str, str], said: str
) -> None:
    out = CliRunner().invoke(main, ["status"], env=env)
    assert out.exit_code == 1
    assert said in out.output


def test_main_a_bad_level_or_json_is_named_and_an_empty_keys_file_is_unset() -> None:
    level = CliRunner().invoke(main, ["status"], env={"LYCHEE_LOG_LEVEL": "LOUD"})
    assert level.exit_code == 1
    assert "LYCHEE_LOG_LEVEL: a level is one of DEBUG, INFO" in level.output
    options = CliRunner().invoke(main, ["status"], env={"LYCHEE_LANCEDB_STORAGE_OPTIONS": "{x"})
    assert options.output.strip() == (
        "Error: invalid settings: LYCHEE_LANCEDB_STORAGE_OPTIONS: not valid JSON (got '{x')"
    )
    keys = CliRunner().invoke(main, ["gateway", "keys", "list"], env={"LYCHEE_API_KEYS_FILE": ""})
    assert keys.output.strip() == "Error: set LYCHEE_API_KEYS_FILE or pass --file"


def test_main_a_reader_that_goes_away_stops_the_command_quietly() -> None:
    """`lychee records NS | head`: the pipe closes under a command still writing."""
    script = (
        "import click\n"
        "from streams.cli.common import LycheeGroup\n"
        "@click.group(cls=LycheeGroup)\n"
        "def g(): pass\n"
        "@g.command()\n"
        "def many():\n"
        "    for i in range(200_000): click.echo(f'line {i}')\n"
        "g()\n"
    )
    writer = subprocess.Popen(
        [sys.executable, "-c", script, "many"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert writer.stdout is not None and writer.stderr is not None
    assert writer.stdout.readline() == b"line 0\n"
    writer.stdout.close()
    error = writer.stderr.read().decode()
    assert (writer.wait(timeout=60), error) == (141, "")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["records", "bad ns/.."], "Invalid value for 'NAMESPACE': must be 1-128 characters"),
        (["records", "demo", "--session", "a b"], "Invalid value for '--session'"),
        (["records", "demo", "--record", "abc"], "--record names the record whose --history"),
        (["records", "demo", "--turns", "--type", "fact"], "choose records, not --turns"),
        (["up", "--data-dir", __file__], "is a file"),
    ],
)
def test_main_options_that_cannot_mean_anything_are_usage_errors(
    args: list[str], said: str
) -> None:
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 2 and said in out.output, out.output


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["throughput", "--exchanges", "0"], "'--exchanges': 0 is not in the range x>=1"),
        (["gateway", "--probes", "-3"], "'--probes': -3 is not in the range x>=1"),
        (["query-load", "--data", __file__, "-k", "0"], "'-k': 0 is not in the range 1<=x<=200"),
        (["query-load", "--data", __file__, "--concurrency", "1,x"], "expected whole numbers"),
        (["embedder", "--data", __file__, "--batch-sizes", "0"], "each must be at least 1"),
        (["locomo", "--data", __file__, "--k", "5,300"], "at least 1 and at most 200"),
        (["locomo", "--data", __file__, "--budgets", "-100"], "'--budgets': '-100'"),
    ],
)
def test_bench_numbers_out_of_range_are_refused_before_anything_starts(
    args: list[str], said: str
) -> None:
    out = CliRunner().invoke(main, ["bench", *args])
    assert out.exit_code == 2 and said in out.output, out.output


def test_main_ask_answer_asks_the_service_for_an_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--answer` reaches the request (an LLM then writes it), and the answer is printed."""
    from schemas import QueryReply
    from streams.client import MemoryClient

    asked: list[bool] = []

    async def search(self: Any, namespace: str, query: str, **kw: Any) -> QueryReply:
        asked.append(kw["answer"])
        return QueryReply(
            correlation_id="c", namespace=namespace, status="ok", query=query, answer="On May 19th."
        )

    monkeypatch.setattr(MemoryClient, "search", search)
    monkeypatch.setattr(MemoryClient, "__aenter__", lambda self: _same(self))
    monkeypatch.setattr(MemoryClient, "__aexit__", lambda self, *a: _same(None))
    out = CliRunner().invoke(main, ["ask", "--namespace", "demo", "When?", "--answer"])
    assert out.exit_code == 0, out.output
    assert asked == [True] and "answer: On May 19th." in out.output


async def _same(value: Any) -> Any:
    return value


def test_main_a_wait_that_times_out_names_the_stages_lychee_up_gave_up_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    import orjson

    from streams.cli.data import failed_stages
    from streams.settings import Settings
    from streams.stack.endpoints import Endpoints, process_start, well_known_path, write_endpoints
    from streams.stack.supervisor import SUPERVISION_FILE

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    s = Settings()
    data = tmp_path / "data"
    data.mkdir()
    here = os.getpid()
    endpoints = Endpoints(
        s.kafka.bootstrap, s.redis.url, "/x", here, str(data), "s3", pid_start=process_start(here)
    )
    write_endpoints(endpoints, well_known_path())
    report = {"pid": here, "data_dir": str(data), "stages": [], "failed": ["encoder"]}
    (data / SUPERVISION_FILE).write_bytes(orjson.dumps(report))
    assert failed_stages(s) == (
        f"; lychee up gave up restarting encoder (see its log under {data}/logs; "
        "`lychee worker STAGE` runs one by hand)"
    )
    (data / SUPERVISION_FILE).write_bytes(orjson.dumps({**report, "failed": []}))
    assert failed_stages(s) == ""
