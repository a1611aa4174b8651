"""Paper-style figures from the tidy table, one per entry of config/figures.yaml.

Layout as in the paper: x = message size on a log2 axis (1MB, 4MB, ...), y = MB/s (the
paper's metric: bytes / 1e6 / mean time), one panel per value of the catalogue's `panels`
(the last key runs across columns, e.g. p=8 | p=9; the others down the rows), one line per
series labelled in the paper's notation. A figure without data is still written, stating
"not measured in this run" and why, so the report can link it and the workflow's outputs
exist; the command also prints that on stderr.
"""
from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (backend must be chosen first)
import pandas as pd  # noqa: E402

from .common import AnalysisError, atomic_path, size_label  # noqa: E402
from .selection import figure_rows  # noqa: E402
from .tidy import with_metric  # noqa: E402

FORMATS = ("png", "pdf")
_VARIANT_RANK = {"blocking": 0, "nonblocking": 1, "fconc": 2, "fsize": 3}


def series_order(rows: pd.DataFrame) -> list[str]:
    """Legend order like the paper: BL, NBL, NBLx2, NBLx4, ..., 1MB, 2MB, ...; NOOP after."""
    keys = {}
    for _, row in rows.drop_duplicates("label").iterrows():
        extra = row["segments_requested"] if row["variant"] == "fconc" else \
            row["segment_bytes_requested"] if row["variant"] == "fsize" else 0
        keys[row["label"]] = (str(row["algorithm"]), row["op"] == "noop",
                              _VARIANT_RANK.get(row["variant"], 9),
                              0 if pd.isna(extra) else int(extra))
    return sorted(keys, key=keys.get)


def panel_title(keys: list[str], values: tuple) -> str:
    parts = []
    for key, value in zip(keys, values):
        parts.append(f"p={value}" if key == "nprocs" else str(value))
    return ", ".join(parts)


def style_panel(ax, panel, panels, key, legend_columns: int) -> None:
    """The paper's panel look: log2 size axis, MB/s from zero, a title naming the panel."""
    format_size_axis(ax, panel["bytes"])
    ax.set_title(panel_title(panels, key), fontsize=10)
    ax.set_xlabel("Message size")
    ax.set_ylabel("MB/s")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, ncol=legend_columns)


def format_size_axis(ax, sizes) -> None:
    """log2 x axis with a tick per power of two (thinned to at most ~10), labelled 1MB, ..."""
    sizes = sorted(int(s) for s in sizes if s > 0)
    ax.set_xscale("log", base=2)
    if not sizes:
        return
    low, high = int(math.log2(sizes[0])), math.ceil(math.log2(sizes[-1]))
    step = max(1, math.ceil((high - low + 1) / 10))
    ticks = [2 ** e for e in range(low, high + 1, step)]
    ax.set_xticks(ticks)
    ax.set_xticklabels([size_label(t) for t in ticks], rotation=45, ha="right")
    ax.minorticks_off()
    ax.set_xlim(2 ** low / 1.3, 2 ** high * 1.3)


def panel_grid(panel_keys: list[str], rows: pd.DataFrame):
    """(fig, {panel values: ax}) with the last panel key across the columns."""
    if not panel_keys:
        combos, col_values, row_values = [()], [()], [()]
    else:
        combos = sorted({tuple(v) for v in rows[panel_keys].itertuples(index=False)},
                        key=lambda t: tuple(str(x).zfill(8) for x in t))
        col_values = sorted({c[-1] for c in combos}, key=lambda x: str(x).zfill(8))
        row_values = sorted({c[:-1] for c in combos}, key=lambda t: tuple(map(str, t)))
    ncols, nrows = len(col_values), len(row_values)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.2 * ncols, 3.9 * nrows + 0.9),
                             squeeze=False)
    grid = {}
    for (i, rv), (j, cv) in itertools.product(enumerate(row_values), enumerate(col_values)):
        key = tuple(rv) + ((cv,) if panel_keys else ())
        if key in combos:
            grid[key] = axes[i][j]
        else:
            axes[i][j].set_visible(False)
    return fig, grid


def _footer(rows: pd.DataFrame, run_id: str) -> str:
    hosts = ", ".join(sorted(set(rows["host"].astype(str))))
    libs = "; ".join(sorted({s.split(",")[0] for s in rows["mpi_library"].astype(str)}))
    return f"run {run_id} on {hosts} | {libs}"[:220]


def _save(fig, out_dir: Path, name: str) -> list[Path]:
    written = []
    for fmt in FORMATS:
        target = out_dir / f"{name}.{fmt}"
        with atomic_path(target) as tmp:
            fig.savefig(tmp, format=fmt, dpi=110, bbox_inches="tight")
        written.append(target)
    plt.close(fig)
    return written


def not_measured_figure(out_dir: Path, name: str, title: str, reason: str) -> list[Path]:
    fig, ax = plt.subplots(figsize=(6, 2.5))
    ax.axis("off")
    ax.text(0.5, 0.6, title, ha="center", va="center", wrap=True, fontsize=10)
    ax.text(0.5, 0.3, f"not measured in this run: {reason}", ha="center", va="center",
            color="darkred", wrap=True, fontsize=10)
    return _save(fig, out_dir, name)


def draw_figure(frame: pd.DataFrame, catalogue: dict, fig_id: str, out_dir,
                run_id: str | None = None, metric: str = "mean") -> dict:
    """Draw one catalogue figure; returns {'figure', 'files', 'measured', 'run_id', 'reason'}.

    metric "mean" is the paper's (bytes / 1e6 / mean time); "median" uses the median time.
    Points whose mean is more than twice their median are drawn hollow: a few stalled
    repetitions dominate them.
    """
    out_dir = Path(out_dir)
    frame = with_metric(frame, metric)
    entry = catalogue[fig_id] if fig_id in catalogue else None
    if entry is None:
        raise AnalysisError(f"figure {fig_id!r} is not in the catalogue; known: "
                            f"{', '.join(catalogue)}")
    if "experiment" not in entry:
        raise AnalysisError(f"{fig_id} is derived ({entry.get('derived_from')}): draw it with "
                            "`python -m analysis table1`")
    rows, run = figure_rows(frame, catalogue, fig_id, run_id)
    if rows.empty:
        reason = "no rows in the table match its experiment" + (
            f" in run {run_id}" if run_id else "")
        print(f"{fig_id}: {reason}; wrote a 'not measured' figure", file=sys.stderr)
        files = not_measured_figure(out_dir, fig_id, entry["title"], reason)
        return {"figure": fig_id, "files": files, "measured": False, "run_id": run_id or "",
                "reason": reason, "series": []}
    panels = list(entry["plot"]["panels"])
    missing = [k for k in panels if k not in rows]
    if missing:
        raise AnalysisError(f"{fig_id}: panel key(s) {', '.join(missing)} are not columns of "
                            "the table (labels missing from the rows?)")
    template = entry["plot"]["series"]
    rows = rows.copy()
    try:
        rows["label"] = [template.format(**{**r, "variant": r["variant_label"],
                                            "op": r["op_label"]})
                         for r in rows.to_dict("records")]
    except KeyError as exc:
        raise AnalysisError(f"{fig_id}: series template {template!r} names {exc}, which is "
                            "not a column of the table") from None
    fig, grid = panel_grid(panels, rows)
    order = series_order(rows)
    # One colour per variant when the algorithm has its own panels (NBLx4 looks the same
    # in the AUTO and the RNG panel, as in the paper); else one per series. NOOP: dashed.
    if "algorithm" in panels:
        key_of = dict(zip(rows["label"], rows["variant_label"]))
    else:
        key_of = {label: label.replace(" NOOP", "") for label in order}
    colour_keys = list(dict.fromkeys(key_of[label] for label in order))
    colours = {label: plt.cm.tab10(colour_keys.index(key_of[label]) % 10) for label in order}
    for key, ax in grid.items():
        wanted = pd.Series([str(k) for k in key], index=panels)
        panel = rows if not panels else rows[(rows[panels].astype(str) == wanted).all(axis=1)]
        for label in order:
            line = panel[panel["label"] == label].sort_values("bytes")
            if line.empty:
                continue
            noop = label.endswith("NOOP")
            colour = colours[label]
            ax.plot(line["bytes"], line["mbps"], marker="s" if noop else "o", markersize=4,
                    linestyle="--" if noop else "-", label=label, color=colour)
            if metric == "mean" and "disturbed" in line:
                bad = line[line["disturbed"].astype(bool)]
                ax.plot(bad["bytes"], bad["mbps"], linestyle="none", marker="o", markersize=7,
                        markerfacecolor="white", markeredgecolor=colour)
        style_panel(ax, panel, panels, key, legend_columns=2 if len(order) > 6 else 1)
    fig.suptitle(entry["title"], fontsize=11)
    footer = _footer(rows, run) + f" | MB/s from the {metric} time"
    if metric == "mean" and rows["disturbed"].astype(bool).any():
        footer += (f" | hollow: {int(rows['disturbed'].astype(bool).sum())} point(s) with mean "
                   "> 2x median (stalls)")
    fig.text(0.5, 0.0, footer, ha="center", va="top", fontsize=7, color="gray")
    fig.tight_layout()
    files = _save(fig, out_dir, fig_id)
    return {"figure": fig_id, "files": files, "measured": True, "run_id": run, "reason": "",
            "series": order}
