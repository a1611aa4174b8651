"""pcbench JSON Lines -> validated, tidy table (one row per measurement, parameters as columns).

Each pcbench row (pipecoll/bench/pcbench-row.schema.json) becomes one table row. Its
`labels` object is flattened into plain columns (algorithm, library, figure, run_id, ...);
a label whose name collides with a row field is an error. Added columns:
  source        file:line the row came from (provenance; also tells re-runs apart)
  variant_label BL | NBL | NBLxY | XMB   (paper notation of the variant)
  op_label      '' | ' NOOP'
  series        paper legend label, e.g. NBLx4(RNG), 32MB(RNG), BL(AUTO), NBL(RNG) NOOP
  time_s        alias of time_mean_s (the paper's metric uses the mean)
  mbps_median   bytes / 1e6 / time_median_s: robust to the long stalls of a shared machine
  disturbed     time_mean_s > 2 x time_median_s: a few repetitions dominate the mean
Re-runs are kept distinct by run_id (and by source); nothing is merged here.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import jsonschema
import pandas as pd

from .common import REPO_ROOT, AnalysisError, atomic_path, size_label

ROW_SCHEMA = REPO_ROOT / "pipecoll" / "bench" / "pcbench-row.schema.json"
DEFAULT_REQUIRED_LABELS = ("algorithm", "library", "run_id")
# A mean more than twice the median means a few repetitions (stalls of a shared, possibly
# oversubscribed machine) dominate the paper's mean-based metric; flagged, never dropped.
DISTURBED = 2.0
VARIANT_PREFIX = {"blocking": "BL", "nonblocking": "NBL"}
# Columns written as text even when every value looks numeric (labels may be "8" or "001").
_NULLABLE_INT = ("segments_requested", "segment_bytes_requested", "root")


def load_schema(path: str | os.PathLike = ROW_SCHEMA) -> dict:
    path = Path(path)
    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AnalysisError(f"row schema {path} does not exist") from None
    except json.JSONDecodeError as exc:
        raise AnalysisError(f"row schema {path} is not valid JSON: {exc}") from None
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


def expand_inputs(inputs: list[str | os.PathLike], allow_empty: bool = False) -> list[Path]:
    """Files as given; directories searched recursively for *.jsonl. Sorted, no duplicates."""
    files: list[Path] = []
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            found = sorted(path.rglob("*.jsonl"))
            if not found and not allow_empty:
                raise AnalysisError(f"directory {path} contains no *.jsonl files (pass "
                                    "--allow-empty if that is expected)")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise AnalysisError(f"input {path} does not exist")
    unique = list(dict.fromkeys(p.resolve() for p in files))
    if not unique and not allow_empty:
        raise AnalysisError("no input files given")
    return unique


def variant_label(variant: str, segments_requested, segment_bytes_requested) -> str:
    """Paper notation: blocking -> BL, nonblocking -> NBL, fconc Y -> NBLxY, fsize X -> XMB."""
    if variant in VARIANT_PREFIX:
        return VARIANT_PREFIX[variant]
    if variant == "fconc":
        return f"NBLx{int(segments_requested)}"
    if variant == "fsize":
        return size_label(int(segment_bytes_requested))
    raise AnalysisError(f"unknown variant {variant!r}")


def series_label(variant: str, algorithm: str, op: str, segments_requested=None,
                 segment_bytes_requested=None, template: str = "{variant}({algorithm}){op}") -> str:
    """Legend label in the paper's notation, e.g. 'NBLx4(RNG) NOOP'."""
    fields = {"variant": variant_label(variant, segments_requested, segment_bytes_requested),
              "algorithm": algorithm, "op": " NOOP" if op == "noop" else ""}
    return template.format(**fields)


def read_rows(files: list[Path], schema: dict, required_labels=DEFAULT_REQUIRED_LABELS,
              default_labels: dict[str, str] | None = None, max_errors: int = 20) -> list[dict]:
    """Validate every line; collect all problems (file:line: what) before failing."""
    validator = jsonschema.Draft202012Validator(schema)
    fields = set(schema.get("properties", {}))
    default_labels = dict(default_labels or {})
    records, errors = [], []
    for path in files:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                where = f"{path}:{number}"
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    errors.append(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})")
                    continue
                problems = sorted(validator.iter_errors(row), key=lambda e: list(e.path))
                for problem in problems:
                    at = "/".join(map(str, problem.absolute_path)) or "(row)"
                    errors.append(f"{where}: schema violation at {at}: {problem.message}")
                if problems:
                    continue
                labels = {**default_labels, **row.pop("labels")}
                clash = sorted(set(labels) & (fields | {"source"}))
                if clash:
                    errors.append(f"{where}: label(s) {', '.join(clash)} collide with row fields; "
                                  "rename the --label given to pcbench")
                    continue
                missing = [key for key in required_labels if key not in labels]
                if missing:
                    errors.append(f"{where}: missing required label(s) {', '.join(missing)} "
                                  f"(pcbench --label KEY=VALUE, or give a default with "
                                  f"--label {missing[0]}=VALUE here)")
                    continue
                row.update(labels)
                row["source"] = where
                records.append(row)
                if len(errors) >= max_errors:
                    break
        if len(errors) >= max_errors:
            break
    if errors:
        more = " (stopped at the first 20)" if len(errors) >= max_errors else ""
        raise AnalysisError(f"{len(errors)} bad row(s){more}:\n  " + "\n  ".join(errors))
    return records


def empty_columns(schema: dict, required_labels=DEFAULT_REQUIRED_LABELS) -> list[str]:
    """Columns of a table without rows: the row fields, the required labels, the derived."""
    fields = [f for f in schema.get("properties", {}) if f != "labels"]
    return fields + list(required_labels) + ["source"]


def to_frame(records: list[dict], columns: list[str] | None = None) -> pd.DataFrame:
    frame = pd.DataFrame.from_records(records, columns=None if records else columns)
    for column in _NULLABLE_INT:
        if column in frame:
            frame[column] = frame[column].astype("Int64")
    if "algorithm" not in frame:
        raise AnalysisError("rows carry no 'algorithm' label: the paper's series need it")
    frame["variant_label"] = pd.Series([
        variant_label(v, y, x) for v, y, x in
        zip(frame["variant"], frame["segments_requested"], frame["segment_bytes_requested"])],
        index=frame.index, dtype=object)
    frame["op_label"] = frame["op"].map({"sum": "", "noop": " NOOP"})
    frame["series"] = pd.Series([
        series_label(v, a, o, y, x) for v, a, o, y, x in
        zip(frame["variant"], frame["algorithm"].astype(str), frame["op"],
            frame["segments_requested"], frame["segment_bytes_requested"])],
        index=frame.index, dtype=object)
    frame["time_s"] = frame["time_mean_s"]
    frame["mbps_median"] = frame["bytes"] / 1e6 / frame["time_median_s"].where(
        frame["time_median_s"] > 0)
    frame["disturbed"] = frame["time_mean_s"] > DISTURBED * frame["time_median_s"]
    return frame


METRICS = ("mean", "median")


def with_metric(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The frame with `mbps`/`time_s` taken from the mean (the paper's metric) or the median."""
    if metric not in METRICS:
        raise AnalysisError(f"metric {metric!r}: use one of {', '.join(METRICS)}")
    if metric == "mean":
        return frame
    frame = frame.copy()
    frame["mbps"] = frame["mbps_median"]
    frame["time_s"] = frame["time_median_s"]
    return frame


def load(inputs, schema_path=ROW_SCHEMA, required_labels=DEFAULT_REQUIRED_LABELS,
         default_labels=None, allow_empty=False) -> pd.DataFrame:
    """JSONL files/directories -> tidy DataFrame (validated).

    No rows at all is an error unless allow_empty (a figure group whose every check failed:
    the table is then written with its columns and no rows, and the figures say so).
    """
    files = expand_inputs(inputs, allow_empty)
    schema = load_schema(schema_path)
    records = read_rows(files, schema, required_labels, default_labels)
    if not records:
        if not allow_empty:
            raise AnalysisError("the inputs contain no rows: " + ", ".join(map(str, inputs))
                                + " (pass --allow-empty to write an empty table)")
        print("warning: the inputs contain no rows; writing an empty table", file=sys.stderr)
    return to_frame(records, empty_columns(schema, required_labels))


def write_table(frame: pd.DataFrame, csv_path, parquet_path=None) -> list[Path]:
    """Write the CSV (always) and Parquet (if asked and pyarrow is installed), atomically."""
    written = []
    with atomic_path(csv_path) as tmp:
        frame.to_csv(tmp, index=False)
    written.append(Path(csv_path))
    if parquet_path:
        try:
            import pyarrow  # noqa: F401  (optional dependency)
        except ImportError:
            raise AnalysisError(f"cannot write {parquet_path}: pyarrow is not installed "
                                "(pip install pyarrow, or drop --parquet)") from None
        with atomic_path(parquet_path) as tmp:
            frame.to_parquet(tmp, index=False)
        written.append(Path(parquet_path))
    return written


def read_table(path) -> pd.DataFrame:
    """Read a table written by write_table (CSV or Parquet) with the right column types."""
    path = Path(path)
    if not path.is_file():
        raise AnalysisError(f"tidy table {path} does not exist (make it with "
                            "`python -m analysis tidy`)")
    if path.suffix == ".parquet":
        frame = pd.read_parquet(path)
    else:
        # Label columns are strings by contract; keep them as text (no "8" -> 8.0 surprises).
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        numeric = ["segments_requested", "segment_bytes_requested", "segments", "bytes",
                   "count", "nprocs", "root", "warmup", "iters", "time_mean_s", "time_min_s",
                   "time_median_s", "time_max_s", "mbps", "busbw_mbps", "time_s", "mbps_median"]
        for column in numeric:
            if column in frame:
                frame[column] = pd.to_numeric(frame[column].replace("", None))
        for column in _NULLABLE_INT + ("segments", "bytes", "count", "nprocs", "warmup", "iters"):
            if column in frame:
                frame[column] = frame[column].astype("Int64")
        for column in ("in_place", "disturbed"):
            if column in frame:
                frame[column] = frame[column].map({"True": True, "False": False})
    missing = [c for c in ("series", "algorithm", "library", "nprocs", "bytes", "mbps")
               if c not in frame]
    if missing:
        raise AnalysisError(f"{path} is not a tidy table: missing column(s) {', '.join(missing)}")
    return frame


def select_run(frame: pd.DataFrame, run_id: str | None = None) -> tuple[pd.DataFrame, str]:
    """Rows of one run: `run_id`, or the run with the latest measurement.

    Performance is compared within one run only (runs on a shared machine differ by up to
    2x). Within the run, a measurement repeated (a retried check) keeps its latest copy.
    """
    if frame.empty:
        return frame, ""
    if run_id is None:
        latest = frame.sort_values("timestamp").iloc[-1]
        run_id = str(latest["run_id"])
    elif run_id not in set(frame["run_id"].astype(str)):
        known = ", ".join(sorted(set(frame["run_id"].astype(str))))
        raise AnalysisError(f"run id {run_id!r} not in the table; known: {known}")
    rows = frame[frame["run_id"].astype(str) == run_id]
    key = [c for c in ("figure", "library", "collective", "algorithm", "variant",
                       "segments_requested", "segment_bytes_requested", "op", "dtype",
                       "nprocs", "bytes") if c in rows]
    rows = rows.sort_values("timestamp").drop_duplicates(subset=key, keep="last")
    return rows.reset_index(drop=True), run_id
