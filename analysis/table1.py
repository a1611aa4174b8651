"""The paper's Table 1 cost models, fitted on this machine, drawn over the measured curves.

Table 1 of the paper (Sec. 3.2), the cost of MPI_Iallreduce of n data items on p processes,
separated into latency (x alpha), bandwidth (x 1/beta) and arithmetic (x 1/gamma) terms:

    Alg.  latency x alpha   bandwidth x 1/beta   arithmetic x 1/gamma
    RDB   log p             n log p              n log p
    RSA   2 log p           2n (p-1)/p           n (p-1)/p
    RNG   2 (p-1)           2n (p-1)/p           n (p-1)/p
    BIN   2 log p           2n log p             n log p

"log p" is log2 p rounded up to an integer when p is not a power of two (the paper says
so under the table). Here n is the message size in BYTES, so beta is in bytes/s and gamma
in bytes reduced per second; the time of one collective is

    T(alg, n, p) = A(alg, p) alpha + B(alg, p) n / beta + C(alg, p) n / gamma

and for an op=noop row (the reduction removed) the arithmetic term is zero.

Fit: one weighted linear least-squares problem per MPI library in the unknowns
(alpha, 1/beta, 1/gamma), all >= 0 (scipy.optimize.lsq_linear), over every plain
non-blocking allreduce row of the four modelled algorithms from the table1 source figures
(fig1: every algorithm; fig4: RNG with and without arithmetic). The NOOP rows are what pin
gamma down; without them gamma rests only on the RDB/BIN vs RSA/RNG difference and the
result says so. Each equation is divided by the measured time, so the fit minimises the
relative error and 16 KB messages weigh as much as 1 GB ones.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import lsq_linear

from .common import AnalysisError, write_text_atomic
from .figures import plt, style_panel, _save
from .selection import figure_rows
from .tidy import with_metric

ALGORITHMS = ("RDB", "RSA", "RNG", "BIN")
EQUATIONS = {
    "RDB": {"latency": "log p", "bandwidth": "n log p", "arithmetic": "n log p"},
    "RSA": {"latency": "2 log p", "bandwidth": "2n (p-1)/p", "arithmetic": "n (p-1)/p"},
    "RNG": {"latency": "2 (p-1)", "bandwidth": "2n (p-1)/p", "arithmetic": "n (p-1)/p"},
    "BIN": {"latency": "2 log p", "bandwidth": "2n log p", "arithmetic": "n log p"},
}


def log_p(p: int) -> int:
    return math.ceil(math.log2(p)) if p > 1 else 0


def coefficients(algorithm: str, p: int) -> tuple[float, float, float]:
    """(A, B, C): T = A alpha + B n/beta + C n/gamma, from Table 1."""
    lg, share = log_p(p), (p - 1) / p
    table = {"RDB": (lg, lg, lg), "RSA": (2 * lg, 2 * share, share),
             "RNG": (2 * (p - 1), 2 * share, share), "BIN": (2 * lg, 2 * lg, lg)}
    if algorithm not in table:
        raise AnalysisError(f"Table 1 has no model for algorithm {algorithm!r}; "
                            f"it models {', '.join(ALGORITHMS)}")
    return table[algorithm]


def model_time(algorithm, nbytes, p, alpha, beta, gamma, arithmetic=True):
    a, b, c = coefficients(algorithm, int(p))
    n = np.asarray(nbytes, dtype=float)
    arith = c * n / gamma if (arithmetic and math.isfinite(gamma) and gamma > 0) else 0.0
    return a * alpha + b * n / beta + arith


def model_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows the models describe: plain non-blocking allreduce of RDB/RSA/RNG/BIN."""
    return rows[(rows["collective"] == "allreduce") & (rows["variant"] == "nonblocking")
                & rows["algorithm"].isin(ALGORITHMS)]


def fit(rows: pd.DataFrame) -> dict:
    """Fit alpha, beta, gamma (see the module docstring) on rows of ONE library."""
    rows = model_rows(rows)
    if rows.empty:
        raise AnalysisError("no plain non-blocking allreduce rows of RDB/RSA/RNG/BIN to fit")
    design, target = [], []
    for r in rows.itertuples(index=False):
        a, b, c = coefficients(r.algorithm, int(r.nprocs))
        n = float(r.bytes)
        design.append([a, b * n, c * n if r.op == "sum" else 0.0])
        target.append(float(r.time_s))
    design, target = np.array(design), np.array(target)
    weights = 1.0 / target
    has_noop = bool((rows["op"] == "noop").any())
    fit_gamma = bool(design[:, 2].any())
    columns = [0, 1, 2] if fit_gamma else [0, 1]
    # Scale the columns to comparable magnitudes so the solver's tolerance is meaningful.
    scaled = design[:, columns] * weights[:, None]
    norms = np.linalg.norm(scaled, axis=0)
    norms[norms == 0] = 1.0
    result = lsq_linear(scaled / norms, target * weights, bounds=(0, np.inf), method="bvls")
    solution = dict(zip(columns, result.x / norms))
    alpha, inv_beta, inv_gamma = solution.get(0, 0.0), solution.get(1, 0.0), solution.get(2, 0.0)
    beta = 1.0 / inv_beta if inv_beta > 0 else math.inf
    gamma = 1.0 / inv_gamma if inv_gamma > 0 else math.inf
    predicted = design @ np.array([alpha, inv_beta, inv_gamma])
    rel = np.abs(predicted - target) / target
    per_alg = {alg: float(np.median(rel[(rows["algorithm"] == alg).to_numpy()]))
               for alg in sorted(set(rows["algorithm"]))}
    if has_noop:
        gamma_from = "SUM vs NOOP rows (arithmetic removed) in the same fit"
    elif fit_gamma:
        gamma_from = ("only the difference between algorithms' arithmetic terms (no NOOP "
                      "rows): weakly determined")
    else:
        gamma_from = "not determined (no rows with arithmetic)"
    return {"alpha_s": alpha, "beta_Bps": beta, "gamma_Bps": gamma,
            "beta_MBps": beta / 1e6, "gamma_MBps": gamma / 1e6,
            "gamma_from": gamma_from, "rows": int(len(rows)),
            "nprocs": sorted(int(p) for p in set(rows["nprocs"])),
            "algorithms": sorted(set(rows["algorithm"])),
            "sizes_bytes": [int(rows["bytes"].min()), int(rows["bytes"].max())],
            "median_relative_error": float(np.median(rel)),
            "median_relative_error_by_algorithm": per_alg}


def fit_all(frame: pd.DataFrame, catalogue: dict, run_id=None,
            metric: str = "mean") -> tuple[list[dict], pd.DataFrame]:
    """One fit per library over the table1 source rows; returns (fits, the rows used).

    metric "mean" fits the mean times (the paper's metric); "median" the median times.
    """
    rows, _ = figure_rows(with_metric(frame, metric), catalogue, "table1", run_id)
    rows = model_rows(rows) if not rows.empty else rows
    fits = []
    for library, part in (rows.groupby("library") if not rows.empty else []):
        result = fit(part)
        result.update({
            "library": library,
            "mpi_library": sorted(set(part["mpi_library"].astype(str))),
            "host": sorted(set(part["host"].astype(str))),
            "run_id": sorted(set(part["run_id"].astype(str))),
            "source_figures": sorted(set(part["source_figure"].astype(str))),
            "pipecoll_version": sorted(set(part["pipecoll_version"].astype(str))),
            "metric": metric,
        })
        fits.append(result)
    return fits, rows


def write_params(fits: list[dict], path) -> None:
    document = {"what": "Table 1 cost-model parameters fitted on this machine",
                "equations": EQUATIONS,
                "time": "T = A alpha + B n/beta + C n/gamma, n in bytes; log p = ceil(log2 p)",
                "units": {"alpha_s": "s", "beta_Bps": "bytes/s", "gamma_Bps":
                          "bytes reduced per second"},
                "fits": fits}
    write_text_atomic(path, json.dumps(document, indent=2, default=str) + "\n")


def draw(fits: list[dict], rows: pd.DataFrame, catalogue: dict, out_dir) -> list[Path]:
    """Measured curves (solid) with the fitted model (dashed) per algorithm and panel."""
    entry = catalogue["table1"]
    if not fits:
        from .figures import not_measured_figure
        return not_measured_figure(Path(out_dir), "table1", entry["title"],
                                   "no plain NBL rows of RDB/RSA/RNG/BIN (fig1/fig4)")
    panels = list(entry["plot"]["panels"])
    if rows["library"].nunique() > 1 and "library" not in panels:
        panels = ["library"] + panels  # one fit per library: keep their curves apart
    combos = sorted({tuple(v) for v in rows[panels].itertuples(index=False)},
                    key=lambda t: tuple(str(x).zfill(8) for x in t))
    ncols = len({c[-1] for c in combos})
    nrows = math.ceil(len(combos) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.2 * ncols, 3.9 * nrows + 0.9),
                             squeeze=False)
    by_library = {f["library"]: f for f in fits}
    colours = {alg: plt.cm.tab10(i) for i, alg in enumerate(ALGORITHMS)}
    for ax, key in zip(axes.flat, combos):
        panel = rows[(rows[panels].astype(str) == pd.Series([str(k) for k in key],
                                                             index=panels)).all(axis=1)]
        params = by_library[panel["library"].iloc[0]]
        for alg in ALGORITHMS:
            for op, style in (("sum", "-"), ("noop", ":")):
                line = panel[(panel["algorithm"] == alg) & (panel["op"] == op)]
                if line.empty:
                    continue
                line = line.groupby("bytes", as_index=False)["mbps"].mean()
                suffix = " NOOP" if op == "noop" else ""
                ax.plot(line["bytes"], line["mbps"], style, marker="o", markersize=4,
                        color=colours[alg], label=f"{alg}{suffix} measured")
                sizes = np.array(sorted(line["bytes"]), dtype=float)
                p = int(panel["nprocs"].iloc[0])
                t = model_time(alg, sizes, p, params["alpha_s"], params["beta_Bps"],
                               params["gamma_Bps"], arithmetic=(op == "sum"))
                ax.plot(sizes, sizes / 1e6 / t, "-." if op == "noop" else "--",
                        color=colours[alg], alpha=0.8,
                        label=f"{alg}{suffix} model")
        style_panel(ax, panel, panels, key, legend_columns=2)
    for ax in list(axes.flat)[len(combos):]:
        ax.set_visible(False)
    fig.suptitle(entry["title"], fontsize=11)
    text = "; ".join(f"{f['library']}: alpha={f['alpha_s'] * 1e6:.3g} us, "
                     f"beta={f['beta_MBps']:.4g} MB/s, gamma={f['gamma_MBps']:.4g} MB/s"
                     for f in fits)
    fig.text(0.5, 0.0, text, ha="center", va="top", fontsize=7, color="gray")
    fig.tight_layout()
    return _save(fig, Path(out_dir), "table1")
