"""Parsing and validating pcbench rows from a real run into the tidy table."""
from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from analysis import tidy
from analysis.common import AnalysisError, REPO_ROOT


def test_real_rows_become_one_row_per_measurement(real_run, real_frame):
    lines = sum(len(p.read_text().splitlines()) for p in real_run["files"])
    assert len(real_frame) == lines
    assert "labels" not in real_frame
    for column in ("algorithm", "library", "figure", "run_id", "series", "variant_label",
                   "source", "mbps", "nprocs", "bytes", "mpi_library"):
        assert column in real_frame, column
    assert set(real_frame["run_id"]) == {real_run["run_id"]}
    assert set(real_frame["nprocs"]) == {2}
    assert sorted(set(real_frame["bytes"])) == [1 << e for e in range(16, 21)]
    # every source is file:line of a real input line
    path, line = real_frame["source"].iloc[0].rsplit(":", 1)
    assert json.loads(open(path).read().splitlines()[int(line) - 1])["bytes"] == \
        real_frame["bytes"].iloc[0]


def test_series_in_paper_notation(real_run, real_frame):
    fig3 = real_frame[real_frame["figure"] == "fig3"]
    assert {"NBL(AUTO)", "NBLx2(AUTO)", "NBLx4(AUTO)"} <= set(fig3["series"])
    if "RNG" in real_run["algorithms"]:
        fig4 = real_frame[real_frame["figure"] == "fig4"]
        assert set(fig4["series"]) == {"NBL(RNG)", "NBLx4(RNG)", "NBL(RNG) NOOP",
                                       "NBLx4(RNG) NOOP"}


@pytest.mark.parametrize("variant, y, x, label", [
    ("blocking", None, None, "BL"), ("nonblocking", None, None, "NBL"),
    ("fconc", 4, None, "NBLx4"), ("fsize", None, 32 << 20, "32MB"),
    ("fsize", None, 512 << 10, "512KB")])
def test_variant_labels(variant, y, x, label):
    assert tidy.variant_label(variant, y, x) == label


def test_series_label_noop():
    assert tidy.series_label("fconc", "RNG", "noop", 4) == "NBLx4(RNG) NOOP"
    assert tidy.series_label("blocking", "AUTO", "sum") == "BL(AUTO)"


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_bad_row_names_file_line_and_violation(real_records, tmp_path):
    rows = [dict(r) for r in real_records[:4]]
    rows[2] = {**rows[2], "op": "max"}
    path = _write(tmp_path / "bad.jsonl", rows)
    with pytest.raises(AnalysisError) as err:
        tidy.load([path])
    text = str(err.value)
    assert f"{path.resolve()}:3: schema violation at op" in text
    assert "'max' is not one of" in text


def test_invalid_json_and_missing_field(real_records, tmp_path):
    row = dict(real_records[0])
    del row["mbps"]
    path = tmp_path / "broken.jsonl"
    path.write_text(json.dumps(real_records[0]) + "\n{not json\n" + json.dumps(row) + "\n")
    with pytest.raises(AnalysisError) as err:
        tidy.load([path])
    assert f"{path.resolve()}:2: not valid JSON" in str(err.value)
    assert f"{path.resolve()}:3: schema violation at (row): 'mbps' is a required" in str(err.value)


def test_missing_required_label_then_default(real_records, tmp_path):
    row = json.loads(json.dumps(real_records[0]))
    del row["labels"]["run_id"]
    path = _write(tmp_path / "nolabel.jsonl", [row])
    with pytest.raises(AnalysisError, match=r"nolabel.jsonl:1: missing required label\(s\) run_id"):
        tidy.load([path])
    frame = tidy.load([path], default_labels={"run_id": "manual"})
    assert frame["run_id"].tolist() == ["manual"]


def test_label_colliding_with_a_field_is_an_error(real_records, tmp_path):
    row = json.loads(json.dumps(real_records[0]))
    row["labels"]["bytes"] = "1"
    with pytest.raises(AnalysisError, match="label.*bytes collide"):
        tidy.load([_write(tmp_path / "clash.jsonl", [row])])


def test_missing_input_and_empty_directory(tmp_path):
    with pytest.raises(AnalysisError, match="does not exist"):
        tidy.load([tmp_path / "nope.jsonl"])
    with pytest.raises(AnalysisError, match="no \\*.jsonl"):
        tidy.load([tmp_path])


def test_csv_round_trip_is_atomic_and_typed(real_frame, tmp_path):
    target = tmp_path / "out" / "tidy.csv"
    tidy.write_table(real_frame, target)
    assert [p.name for p in target.parent.iterdir()] == ["tidy.csv"]   # no temp files left
    back = tidy.read_table(target)
    assert len(back) == len(real_frame)
    pd.testing.assert_series_equal(back["mbps"], real_frame["mbps"], check_names=False)
    assert back["bytes"].tolist() == real_frame["bytes"].tolist()
    assert back["series"].tolist() == real_frame["series"].tolist()
    assert back["disturbed"].tolist() == real_frame["disturbed"].tolist()


def test_parquet_needs_pyarrow(real_frame, tmp_path):
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        with pytest.raises(AnalysisError, match="pyarrow is not installed"):
            tidy.write_table(real_frame, tmp_path / "t.csv", tmp_path / "t.parquet")
    else:
        tidy.write_table(real_frame, tmp_path / "t.csv", tmp_path / "t.parquet")
        assert len(tidy.read_table(tmp_path / "t.parquet")) == len(real_frame)


def test_reruns_kept_distinct_and_latest_selected(real_records, frame_from):
    first = frame_from(real_records, run_id="run-a")
    second = frame_from(real_records, run_id="run-b")
    second["timestamp"] = second["timestamp"].str.replace("20", "30", n=1)  # later
    both = pd.concat([first, second], ignore_index=True)
    assert len(both) == 2 * len(real_records)
    rows, run = tidy.select_run(both)
    assert run == "run-b" and len(rows) == len(real_records)
    rows, run = tidy.select_run(both, "run-a")
    assert run == "run-a" and len(rows) == len(real_records)
    with pytest.raises(AnalysisError, match="run id 'run-c' not in the table"):
        tidy.select_run(both, "run-c")


def test_cli_reports_bad_row_without_traceback(real_records, tmp_path):
    rows = [dict(r) for r in real_records[:2]]
    rows[1] = {**rows[1], "nprocs": 0}
    path = _write(tmp_path / "bad.jsonl", rows)
    done = subprocess.run([sys.executable, "-m", "analysis", "tidy", str(path), "-o",
                           str(tmp_path / "t.csv")], capture_output=True, text=True,
                          cwd=REPO_ROOT)
    assert done.returncode == 2
    assert f"{path.resolve()}:2: schema violation at nprocs" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "t.csv").exists()


def test_allow_empty_writes_columns_only(tmp_path):
    (tmp_path / "group").mkdir()
    with pytest.raises(AnalysisError, match="contains no \\*.jsonl files"):
        tidy.load([tmp_path / "group"])
    frame = tidy.load([tmp_path / "group"], allow_empty=True)
    assert frame.empty and {"series", "algorithm", "mbps", "run_id"} <= set(frame.columns)
    tidy.write_table(frame, tmp_path / "t.csv")
    assert tidy.read_table(tmp_path / "t.csv").empty
