"""Which tidy rows feed which figure of config/figures.yaml."""
from __future__ import annotations

import pandas as pd

from .common import AnalysisError, parse_size
from .tidy import select_run


def _variant_mask(frame: pd.DataFrame, spec: str) -> pd.Series:
    kind, _, arg = str(spec).partition(":")
    if kind in ("blocking", "nonblocking"):
        return frame["variant"] == kind
    if kind == "fconc":
        return (frame["variant"] == "fconc") & (frame["segments_requested"] == int(arg))
    if kind == "fsize":
        return (frame["variant"] == "fsize") & (frame["segment_bytes_requested"] == parse_size(arg))
    raise AnalysisError(f"figure catalogue: unknown variant {spec!r}")


def experiment_mask(frame: pd.DataFrame, experiment: dict) -> pd.Series:
    """Rows matching the experiment: collective, library, algorithm, variants and ops."""
    mask = frame["collective"] == experiment["collective"]
    algorithms = experiment.get("algorithms", {})
    lib_mask = pd.Series(False, index=frame.index)
    for library in experiment["libraries"]:
        wanted = algorithms.get(library, "all")
        this = frame["library"] == library
        if wanted != "all":
            this &= frame["algorithm"].isin(wanted)
        lib_mask |= this
    variant_mask = pd.Series(False, index=frame.index)
    for spec in experiment["variants"]:
        variant_mask |= _variant_mask(frame, spec)
    return mask & lib_mask & variant_mask & frame["op"].isin(experiment["ops"])


def figure_rows(frame: pd.DataFrame, catalogue: dict, fig_id: str,
                run_id: str | None = None) -> tuple[pd.DataFrame, str]:
    """Rows of one figure from one run (latest by default), failed checks removed.

    A row belongs to a figure when it matches the figure's experiment; when rows carry a
    `figure` label, it must also name this figure (so that fig3's NBL(RNG) is not mixed
    with fig4's). For derived entries (table1) the rows of every source figure are used.
    """
    if fig_id not in catalogue:
        raise AnalysisError(f"figure {fig_id!r} is not in the catalogue; known: "
                            f"{', '.join(catalogue)}")
    entry = catalogue[fig_id]
    if "derived_from" in entry:
        parts = [figure_rows(frame, catalogue, source, run_id)[0].assign(source_figure=source)
                 for source in entry["derived_from"]]
        rows = pd.concat(parts, ignore_index=True) if parts else frame.iloc[0:0]
        run = ",".join(sorted(set(rows["run_id"].astype(str)))) if not rows.empty else ""
        return rows, run
    mask = experiment_mask(frame, entry["experiment"])
    if "figure" in frame:
        mask &= frame["figure"].astype(str) == fig_id
    if run_id is not None:
        mask &= frame["run_id"].astype(str) == str(run_id)
    rows = frame[mask]
    if "check" in rows:
        rows = rows[rows["check"] != "fail"]
    return select_run(rows) if not rows.empty else (rows, "")
