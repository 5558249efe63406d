"""The benchmark package's harness: registry, runner, results schema, compare."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from bench import __main__ as cli
from bench import harness
from bench.registry import BENCHMARKS, TIERS

BENCH = Path(harness.__file__).resolve().parent
HELPERS = {"__init__", "__main__", "harness", "registry", "floor_server", "page_cache",
           "controller_timeline", "spark_floor"}


def test_every_module_is_registered_in_a_tier_and_imports(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(harness.OUT_ENV, str(tmp_path))
    modules = {p.stem for p in BENCH.glob("*.py")}
    assert modules - HELPERS == set(BENCHMARKS), "a module neither registered nor a helper"
    for bench in BENCHMARKS.values():
        assert bench.tier in TIERS and bench.summary
        importlib.import_module(bench.module)  # package imports, no sys.path tricks


def test_run_writes_one_current_result_in_the_schema(tmp_path, capsys) -> None:
    bench = BENCHMARKS["decode_guard"]
    readme = tmp_path / "README.md"
    readme.write_text(f"before\n{cli.TABLE_BEGIN}\nold\n{cli.TABLE_END}\nafter\n")
    for _ in range(2):  # a second run replaces the first
        assert cli.run_one(bench, ["--iterations", "20"], quick=False, save=True,
                           results_dir=tmp_path) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "README.md", "decode_guard.json", "decode_guard.md"]
    doc = json.loads((tmp_path / "decode_guard.json").read_text())
    assert doc["schema"] == harness.SCHEMA_VERSION and doc["benchmark"] == "decode_guard"
    assert doc["tier"] == "inprocess" and doc["argv"] == ["--iterations", "20"]
    assert doc["commit"] == doc["machine"]["commit"] != "?"
    assert doc["machine"]["cores"] >= 1 and "load_average_at_end" in doc["machine"]
    assert doc["cost"]["wall_s"] > 0 and doc["cost"]["cpu_s"] > 0
    assert doc["results"]["iterations"] == 20  # the module's own JSON, nested
    report = (tmp_path / "decode_guard.md").read_text()
    assert report.count("# Guard cost on request decoding") == 1  # one copy of the report
    assert f"_Commit {doc['commit']}," in report
    cli.write_table(readme, tmp_path)
    text = readme.read_text()
    assert text.startswith("before\n") and text.endswith("after\n") and "\nold\n" not in text
    assert f"| [decode_guard](results/decode_guard.md) | inprocess | {doc['commit']} |" in text
    assert "| produce_path | inprocess | (not run yet) |" in text


def test_a_failed_run_leaves_the_current_result(tmp_path) -> None:
    bench = BENCHMARKS["decode_guard"]
    (tmp_path / "decode_guard.json").write_text("{}")
    assert cli.run_one(bench, ["--iterations", "not-a-number"], quick=False, save=True,
                       results_dir=tmp_path) != 0
    assert (tmp_path / "decode_guard.json").read_text() == "{}"
    assert not (tmp_path / "decode_guard.md").exists()


def test_collect_keeps_one_copy_of_a_report_and_falls_back_to_stdout(tmp_path) -> None:
    (tmp_path / "x-20260101T000000Z.md").write_text("# report\n")
    (tmp_path / "x-latest.md").write_text("# report\n")
    (tmp_path / "x.json").write_text('{"a": 1}')
    assert cli._collect(tmp_path, "ignored") == ({"a": 1}, "# report")
    empty = tmp_path / "empty"
    empty.mkdir()
    results, report = cli._collect(empty, "printed only\n")
    assert results is None and "printed only" in report


def _doc(commit: str, cpu: str, figures: dict) -> dict:
    return {"schema": 1, "commit": commit, "argv": [], "cost": {"wall_s": 2.0, "cpu_s": 1.0},
            "machine": {"cpu": cpu, "cores": 2, "ram_gib": 23.5}, "results": figures}


def test_compare_lines_up_every_figure_and_flags_another_machine() -> None:
    a = _doc("aaa", "EPYC", {"runs": [{"mb_s": 100.0}, {"mb_s": 50}], "ok": True, "n": "x"})
    b = _doc("bbb", "EPYC", {"runs": [{"mb_s": 120.0}], "extra": 3})
    lines = cli.compare(a, b)
    assert lines[0] == "commit: aaa → bbb"
    assert not any("machines differ" in line for line in lines)
    row = next(line for line in lines if line.startswith("results.runs[0].mb_s"))
    assert row.split()[1:] == ["100", "120", "1.200"]
    assert next(line for line in lines if line.startswith("results.runs[1].mb_s")).split()[2] == "-"
    assert any(line.startswith("results.extra") for line in lines)
    assert not any(line.startswith("results.ok") for line in lines)  # booleans are no figures
    other = cli.compare(a, _doc("bbb", "Xeon", {}))
    assert any("machines differ" in line for line in other)


def test_cli_refuses_unknown_benchmarks_and_revisions(capsys) -> None:
    with pytest.raises(SystemExit, match="no benchmark 'nope'"):
        cli.main(["run", "nope"])
    with pytest.raises(SystemExit, match="not a revision"):
        cli.main(["compare", "no-such-rev", "HEAD", "decode_guard"])
    assert cli.main(["run", "decode_guard", "--quick", "--dry-run"]) == 0
    assert capsys.readouterr().out.strip().endswith("-m bench.decode_guard --iterations 2000")


def test_the_tables_of_a_markdown_report_are_its_figures() -> None:
    report = """# Checkpoint stall — 20261205T074354Z

| partitions | loop (ms) | I/O thread, median / max |
|---:|---:|---:|
| 1 | 0.4 | 0.4 / 6.6 |
| 1,000 | **1.0** | 0.6 / 3.9 |

## Produce path

| batch | acks | Python calls / request | CPU µs / request | all rounds |
|---|---|---:|---:|---|
| 16 KiB | 1 | 76 | 33.3 µs | 31, 33 |
| 16 KiB | all | 87 | 32.4 µs | 30, 32 |
"""
    assert harness.tables_of(report) == {
        "Checkpoint stall": {
            "1": {"loop (ms)": 0.4, "I/O thread, median / max [1]": 0.4,
                  "I/O thread, median / max [2]": 6.6},
            "1,000": {"loop (ms)": 1.0, "I/O thread, median / max [1]": 0.6,
                      "I/O thread, median / max [2]": 3.9}},
        "Produce path": {
            "16 KiB | 1": {"Python calls / request": 76.0, "CPU µs / request": 33.3},
            "16 KiB | all": {"Python calls / request": 87.0, "CPU µs / request": 32.4}}}
    # the same report from another run lines up: the title carries no date
    again = report.replace("20261205T074354Z", "20261206T010101Z")
    assert harness.tables_of(again) == harness.tables_of(report)


def test_measure_runs_a_benchmark_against_each_revisions_weir(capsys) -> None:
    assert cli.main(["compare", "HEAD", "HEAD", "fetch_purgatory", "--measure", "--rounds",
                     "1", "--partitions", "20", "--cycles", "2"]) == 0
    out = capsys.readouterr().out
    # each run imported the weir/ exported from its revision, not the checkout's
    assert "/tree-0/weir;" in out and "/tree-1/weir;" in out
    row = next(line for line in out.splitlines() if line.startswith("results.idle_cycle_reads"))
    assert row.split()[1:] == ["40", "40", "1.000"]  # partition reads: exact, 2 per partition
    with pytest.raises(SystemExit, match="ab tier"):
        cli.main(["compare", "HEAD", "HEAD", "replication", "--measure"])
