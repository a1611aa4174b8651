"""Each micro-benchmark finding of the paper as a rule computed from the measured rows.

A rule compares series of ONE run (the latest per figure unless a run id is given) at each
process count p and message size measured. The paper's size thresholds (e.g. "above
32 MB") are kept; when no measured size reaches one, the rule is evaluated at the largest
size measured and the verdict says so. A gain counts when it is at least GAIN (5%): within
one run on this machine smaller differences are noise.

Verdicts: "holds", "does not hold", "not measured here" (no rows for it).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pandas as pd

from .common import PAPER_REFERENCE, load_yaml, size_label
from .selection import figure_rows
from .tidy import with_metric

GAIN = 1.05
HOLDS, FAILS, NOT_MEASURED = "holds", "does not hold", "not measured here"
MB = 1 << 20


@dataclasses.dataclass
class Verdict:
    id: str
    figure: str
    claim: str          # the paper's finding, with its numbers (from paper_reference.yaml)
    source: str         # where in the paper
    rule: str           # the rule as applied to our data
    ours: str           # our numbers
    verdict: str
    notes: str = ""     # what differs from the paper's setting (p, sizes, ...)
    run_id: str = ""


# -- helpers ---------------------------------------------------------------------------------
def _fmt_p(ps) -> str:
    return ", ".join(str(int(p)) for p in sorted(ps))


def sizes_at_least(sizes, min_bytes: int) -> tuple[list[int], str]:
    """Measured sizes >= min_bytes, or the largest measured size with a note saying so."""
    sizes = sorted({int(s) for s in sizes})
    chosen = [s for s in sizes if s >= min_bytes]
    if chosen or not sizes:
        return chosen, ""
    return [sizes[-1]], (f"no size >= {size_label(min_bytes)} measured; evaluated at the "
                         f"largest measured size, {size_label(sizes[-1])}")


def gain_table(rows: pd.DataFrame, base_series: str, pipelined: Callable[[pd.Series], bool],
               by=("nprocs",)) -> pd.DataFrame:
    """Per (by..., bytes): MB/s of base_series, the best pipelined series, and their ratio."""
    by = list(by)
    base = rows[rows["series"] == base_series][by + ["bytes", "mbps"]]
    pipe = rows[rows.apply(pipelined, axis=1)]
    if base.empty or pipe.empty:
        return pd.DataFrame(columns=by + ["bytes", "base", "best", "best_series", "ratio"])
    best = pipe.sort_values("mbps").groupby(by + ["bytes"]).tail(1)
    best = best[by + ["bytes", "mbps", "series"]].rename(
        columns={"mbps": "best", "series": "best_series"})
    table = base.rename(columns={"mbps": "base"}).merge(best, on=by + ["bytes"])
    table["ratio"] = table["best"] / table["base"]
    return table.sort_values(by + ["bytes"]).reset_index(drop=True)


def describe_ratios(table: pd.DataFrame, by=("nprocs",), what="ratio") -> str:
    parts = []
    for key, part in table.groupby(list(by)):
        key = key if isinstance(key, tuple) else (key,)
        name = ", ".join(f"p={k}" if b == "nprocs" else str(k) for b, k in zip(by, key))
        lo, hi = part[what].min(), part[what].max()
        at = ", ".join(f"{size_label(b)}: {r:.2f}" for b, r in zip(part["bytes"], part[what]))
        span = f"{lo:.2f}" if abs(hi - lo) < 5e-3 else f"{lo:.2f}..{hi:.2f}"
        parts.append(f"{name}: {span} ({at})" if len(part) <= 4 else f"{name}: {span}")
    return "; ".join(parts)


def _is_fconc(row) -> bool:
    return row["variant"] == "fconc"


def _is_fsize(row) -> bool:
    return row["variant"] == "fsize"


def _p_note(rows: pd.DataFrame, paper_p) -> str:
    return f"p measured: {_fmt_p(set(rows['nprocs']))} (paper: {_fmt_p(paper_p)})"


# -- the rules -------------------------------------------------------------------------------
class Findings:
    def __init__(self, frame: pd.DataFrame, catalogue: dict, reference: dict,
                 run_id: str | None = None, fits: list[dict] | None = None,
                 metric: str = "mean"):
        self.frame, self.catalogue, self.ref = with_metric(frame, metric), catalogue, reference
        self.run_id, self.fits = run_id, fits or []
        self.p_allreduce = reference["platform"]["nprocs"]["allreduce"]
        self.p_others = reference["platform"]["nprocs"]["others"]

    def rows(self, fig: str) -> tuple[pd.DataFrame, str]:
        return figure_rows(self.frame, self.catalogue, fig, self.run_id)

    def verdict(self, fid: str, rule: str, **kw) -> Verdict:
        ref = self.ref["findings"][fid]
        return Verdict(id=fid, figure=fid.split(".")[0], claim=ref["paper"],
                       source=ref["source"], rule=rule, **kw)

    def _gain_rule(self, fid, fig, base, pipelined, rule, min_bytes=None, max_bytes=None,
                   threshold=GAIN, below=False, paper_p=None, by=("nprocs",), rows=None):
        """Generic: best pipelined / base >= threshold (or < threshold if below) on a domain."""
        if rows is None:
            rows, run = self.rows(fig)
        else:
            run = ",".join(sorted(set(rows["run_id"].astype(str)))) if not rows.empty else ""
        table = gain_table(rows, base, pipelined, by) if not rows.empty else pd.DataFrame()
        if table.empty:
            return self.verdict(fid, rule, ours="", verdict=NOT_MEASURED,
                                notes=f"no {base} and pipelined rows in {fig}", run_id=run)
        note = ""
        if min_bytes is not None:
            sizes, note = sizes_at_least(table["bytes"], min_bytes)
            table = table[table["bytes"].isin(sizes)]
        if max_bytes is not None:
            table = table[table["bytes"] <= max_bytes]
        if table.empty:
            return self.verdict(fid, rule, ours="", verdict=NOT_MEASURED,
                                notes=f"no measured size in the rule's range", run_id=run)
        ok = (table["ratio"] < threshold) if below else (table["ratio"] >= threshold)
        notes = "; ".join(n for n in (note, _p_note(rows, paper_p or self.p_allreduce)) if n)
        return self.verdict(fid, rule, ours="best pipelined / " + base + ": "
                            + describe_ratios(table, by), verdict=HOLDS if ok.all() else FAILS,
                            notes=notes, run_id=run)

    # fig1 -------------------------------------------------------------------------------
    def fig1_rng_best(self) -> Verdict:
        rule = ("holds if NBL(RNG) >= 0.95 x the best other Open MPI algorithm at every "
                "measured size >= 1 MB (or the largest measured), for every p")
        rows, run = self.rows("fig1")
        rows = rows[rows["library"] == "openmpi"] if not rows.empty else rows
        if rows.empty or "NBL(RNG)" not in set(rows["series"]):
            return self.verdict("fig1.rng_best", rule, ours="", verdict=NOT_MEASURED, run_id=run)
        others = rows[~rows["algorithm"].isin(["RNG"])]
        table = gain_table(rows, "NBL(RNG)", lambda r: r["algorithm"] != "RNG")
        sizes, note = sizes_at_least(table["bytes"], MB)
        table = table[table["bytes"].isin(sizes)].copy()
        table["ratio"] = table["base"] / table["best"]   # RNG / best other
        ok = (table["ratio"] >= 0.95).all()
        winners = ", ".join(sorted(set(table["best_series"])))
        return self.verdict("fig1.rng_best", rule, verdict=HOLDS if ok else FAILS, run_id=run,
                            ours=f"NBL(RNG) / best other ({winners}): " + describe_ratios(table),
                            notes="; ".join(n for n in (note, _p_note(rows, self.p_allreduce),
                                  f"algorithms measured: {', '.join(sorted(set(others['algorithm'])))}") if n))

    def fig1_auto_rsa(self) -> Verdict:
        rule = ("holds if, for every library and p, NBL(AUTO)'s MB/s is closer to NBL(RSA) than "
                "to any other algorithm at the majority of measured sizes >= 64 KB (the "
                "choice is inferred from the curves; the library does not report it)")
        rows, run = self.rows("fig1")
        if rows.empty or "AUTO" not in set(rows["algorithm"]):
            return self.verdict("fig1.auto_rsa", rule, ours="", verdict=NOT_MEASURED, run_id=run)
        ours, ok_all = [], True
        for (lib, p), part in rows[rows["bytes"] >= 64 * 1024].groupby(["library", "nprocs"]):
            wide = part.pivot_table(index="bytes", columns="algorithm", values="mbps")
            if "AUTO" not in wide or wide.shape[1] < 2:
                continue
            others = wide.drop(columns="AUTO")
            nearest = (others.sub(wide["AUTO"], axis=0).abs()).idxmin(axis=1)
            top = nearest.value_counts()
            ok = "RSA" in top.index and top.get("RSA", 0) > len(nearest) / 2
            ok_all &= ok
            ours.append(f"{lib} p={p}: AUTO nearest to {top.index[0]} at "
                        f"{top.iloc[0]}/{len(nearest)} sizes")
        if not ours:
            return self.verdict("fig1.auto_rsa", rule, ours="", verdict=NOT_MEASURED,
                                notes="no size >= 64 KB with AUTO and another algorithm",
                                run_id=run)
        return self.verdict("fig1.auto_rsa", rule, ours="; ".join(ours),
                            verdict=HOLDS if ok_all else FAILS, run_id=run,
                            notes=_p_note(rows, self.p_allreduce) + "; Open MPI's libnbc picks "
                            "binomial below 4 ranks or 64 KiB (FACTS.md), so small p matters")

    def fig1_mpich_no_ring(self) -> Verdict:
        rule = ("holds if fig1 has MPICH rows and none of them is RNG (the algorithm table "
                "offers RNG for a library only when the library has a ring)")
        rows, run = self.rows("fig1")
        mpich = rows[rows["library"] == "mpich"] if not rows.empty else rows
        if mpich.empty:
            return self.verdict("fig1.mpich_no_ring", rule, ours="", verdict=NOT_MEASURED,
                                run_id=run)
        algs = sorted(set(mpich["algorithm"]))
        version = "; ".join(sorted(set(mpich["mpi_library"].astype(str))))
        return self.verdict("fig1.mpich_no_ring", rule, run_id=run,
                            ours=f"MPICH algorithms measured: {', '.join(algs)}",
                            verdict=FAILS if "RNG" in algs else HOLDS,
                            notes=f"library here: {version} (paper: MPICH 3.3.1)")

    # fig2 -------------------------------------------------------------------------------
    def fig2_auto_fsize_gain(self) -> Verdict:
        ref = self.ref["findings"]["fig2.auto_fsize_gain"]
        return self._gain_rule(
            "fig2.auto_fsize_gain", "fig2", "NBL(AUTO)",
            lambda r: _is_fsize(r) and r["algorithm"] == "AUTO",
            f"holds if the best XMB(AUTO) / NBL(AUTO) >= {GAIN} at every measured size >= "
            f"{size_label(ref['min_bytes'])} (or the largest measured), for every p",
            min_bytes=ref["min_bytes"])

    def fig2_rng_vs_auto(self) -> Verdict:
        rule = ("holds if the best XMB(RNG) / NBL(AUTO) >= 1.5 at every measured size >= 32 MB "
                "(or the largest measured), for every p")
        return self._gain_rule("fig2.rng_vs_auto", "fig2", "NBL(AUTO)",
                               lambda r: _is_fsize(r) and r["algorithm"] == "RNG", rule,
                               min_bytes=32 * MB, threshold=1.5)

    def fig2_rng_sustains(self) -> Verdict:
        ref = self.ref["findings"]["fig2.rng_sustains"]
        rule = ("holds if, for every p, the best XMB(RNG) at the largest size is >= 0.9 x its "
                "peak while NBL(RNG) at the largest size is <= 0.9 x its peak (paper: "
                f"{ref['plain_large_MBps']}/{ref['plain_peak_MBps']} = "
                f"{ref['plain_large_MBps'] / ref['plain_peak_MBps']:.2f})")
        rows, run = self.rows("fig2")
        rows = rows[rows["algorithm"] == "RNG"] if not rows.empty else rows
        if rows.empty or "NBL(RNG)" not in set(rows["series"]) \
                or not (rows["variant"] == "fsize").any():
            return self.verdict("fig2.rng_sustains", rule, ours="", verdict=NOT_MEASURED,
                                run_id=run)
        ours, ok_all = [], True
        for p, part in rows.groupby("nprocs"):
            largest = part["bytes"].max()
            plain = part[part["series"] == "NBL(RNG)"].set_index("bytes")["mbps"]
            pipe = part[part["variant"] == "fsize"].groupby("bytes")["mbps"].max()
            plain_keep = plain.get(largest, float("nan")) / plain.max()
            pipe_keep = pipe.get(largest, float("nan")) / pipe.max()
            ok_all &= bool(pipe_keep >= 0.9 and plain_keep <= 0.9)
            ours.append(f"p={p}: at {size_label(largest)} NBL(RNG) {plain.get(largest, float('nan')):.0f} "
                        f"MB/s = {plain_keep:.2f} x its peak {plain.max():.0f}; best XMB(RNG) "
                        f"{pipe.get(largest, float('nan')):.0f} MB/s = {pipe_keep:.2f} x its peak")
        return self.verdict("fig2.rng_sustains", rule, ours="; ".join(ours), run_id=run,
                            verdict=HOLDS if ok_all else FAILS,
                            notes=f"largest size here {size_label(rows['bytes'].max())} (paper: "
                            f"1GB); " + _p_note(rows, self.p_allreduce))

    # fig3 -------------------------------------------------------------------------------
    def fig3_auto_only_above_32MB(self) -> Verdict:
        threshold = self.ref["findings"]["fig3.auto_only_above_32MB"]["threshold_bytes"]
        rule = (f"holds if the best NBLxY(AUTO) / NBL(AUTO) < {GAIN} at every measured size <= "
                f"{size_label(threshold)} and >= {GAIN} at every measured size above it, for "
                "every p; a part with no measured size is left out and said so")
        below = self._gain_rule("fig3.auto_only_above_32MB", "fig3", "NBL(AUTO)",
                                lambda r: _is_fconc(r) and r["algorithm"] == "AUTO", rule,
                                max_bytes=threshold, below=True)
        rows, _ = self.rows("fig3")
        if rows.empty or rows["bytes"].max() <= threshold:
            if below.verdict != NOT_MEASURED:
                below.notes += (f"; no size above {size_label(threshold)} measured: only the "
                                "'no gain below' part is checked")
            return below
        above = self._gain_rule("fig3.auto_only_above_32MB", "fig3", "NBL(AUTO)",
                                lambda r: _is_fconc(r) and r["algorithm"] == "AUTO", rule,
                                min_bytes=threshold + 1)
        both = [v for v in (below, above) if v.verdict != NOT_MEASURED]
        below.ours = f"<= {size_label(threshold)}: {below.ours}; above: {above.ours}"
        below.verdict = FAILS if any(v.verdict == FAILS for v in both) else HOLDS
        return below

    def fig3_rng_gain(self) -> Verdict:
        ref = self.ref["findings"]["fig3.rng_gain"]
        return self._gain_rule(
            "fig3.rng_gain", "fig3", "NBL(RNG)",
            lambda r: _is_fconc(r) and r["algorithm"] == "RNG",
            f"holds if the best NBLxY(RNG) / NBL(RNG) >= {GAIN} at every measured size >= "
            f"{size_label(ref['min_bytes'])} (or the largest measured), for every p "
            f"(paper: up to {ref['max_gain']})", min_bytes=ref["min_bytes"])

    def _paper_ratios(self, fid: str, top: str, bottom: str) -> str:
        ref = self.ref["findings"][fid]
        return ", ".join(f"{ref[top][p]}/{ref[bottom][p]} = {ref[top][p] / ref[bottom][p]:.2f} "
                         f"at p={p}" for p in ref[bottom])

    def fig3_rng_vs_auto(self) -> Verdict:
        paper = self._paper_ratios("fig3.rng_vs_auto", "pipelined_rng_MBps", "auto_MBps")
        return self._gain_rule(
            "fig3.rng_vs_auto", "fig3", "NBL(AUTO)",
            lambda r: _is_fconc(r) and r["algorithm"] == "RNG",
            "holds if the best NBLxY(RNG) / NBL(AUTO) >= 2 at every measured size >= 32 MB (or "
            f"the largest measured), for every p (paper: {paper})",
            min_bytes=32 * MB, threshold=2.0)

    # fig4 -------------------------------------------------------------------------------
    def _arith_share(self, rows, variant_label):
        sums = rows[(rows["variant_label"] == variant_label) & (rows["op"] == "sum")]
        noops = rows[(rows["variant_label"] == variant_label) & (rows["op"] == "noop")]
        both = sums.merge(noops, on=["nprocs", "bytes"], suffixes=("_sum", "_noop"))
        both["ratio"] = 1 - both["time_s_noop"] / both["time_s_sum"]
        return both[["nprocs", "bytes", "ratio"]]

    def fig4_arithmetic(self, fid: str, variant_label: str) -> Verdict:
        ref = self.ref["findings"][fid]
        if "share" in ref:
            lo, hi = ref["share"]
            rule = (f"holds if 1 - T(NOOP)/T(SUM) of {variant_label}(RNG) lies in "
                    f"[{lo - 0.05:.2f}, {hi + 0.05:.2f}] (the paper's {lo:.0%}-{hi:.0%} +- 5 "
                    "points) at every measured size >= 1 MB (or the largest measured), every p")
        else:
            lo, hi = -float("inf"), ref["share_max"] - 0.05
            rule = (f"holds if 1 - T(NOOP)/T(SUM) of {variant_label}(RNG) is < "
                    f"{ref['share_max']:.2f} at every measured size >= 1 MB (or the largest "
                    "measured), every p")
        rows, run = self.rows("fig4")
        table = self._arith_share(rows, variant_label) if not rows.empty else pd.DataFrame()
        if table.empty:
            return self.verdict(fid, rule, ours="", verdict=NOT_MEASURED, run_id=run)
        sizes, note = sizes_at_least(table["bytes"], MB)
        table = table[table["bytes"].isin(sizes)]
        ok = ((table["ratio"] >= lo - 0.05) & (table["ratio"] <= hi + 0.05)).all()
        return self.verdict(fid, rule, verdict=HOLDS if ok else FAILS, run_id=run,
                            ours="arithmetic share of the time: " + describe_ratios(table),
                            notes="; ".join(n for n in (note, _p_note(rows, [8])) if n))

    # fig5-7, fig11 ----------------------------------------------------------------------
    def fig5_no_gain(self) -> Verdict:
        return self._gain_rule(
            "fig5.no_gain", "fig5", "NBL(LIN)", _is_fconc,
            f"holds if the best NBLxY(LIN) / NBL(LIN) < {GAIN} at every measured size and p",
            below=True, paper_p=self.p_others)

    def fig6_gain(self) -> Verdict:
        paper = self._paper_ratios("fig6.gain", "pipelined_MBps", "plain_MBps")
        return self._gain_rule(
            "fig6.gain", "fig6", "NBL(CHAIN)", _is_fconc,
            "holds if the best NBLxY(CHAIN) / NBL(CHAIN) >= 1.2 at every measured size >= "
            f"32 MB (or the largest measured), every p (paper: {paper})",
            min_bytes=32 * MB, threshold=1.2, paper_p=self.p_others)

    def fig7_gain(self) -> Verdict:
        threshold = self.ref["findings"]["fig7.gain_above_16MB"]["threshold_bytes"]
        rule = (f"holds if the best NBLxY(AUTO) / NBL(AUTO) < {GAIN} at every measured size < "
                f"{size_label(threshold)} and >= 1.02 (about +100 MB/s) above it, every p")
        below = self._gain_rule("fig7.gain_above_16MB", "fig7", "NBL(AUTO)", _is_fconc, rule,
                                max_bytes=threshold - 1, below=True, paper_p=self.p_others)
        rows, _ = self.rows("fig7")
        if rows.empty or rows["bytes"].max() < threshold:
            if below.verdict != NOT_MEASURED:
                below.notes += (f"; no size >= {size_label(threshold)} measured: only the "
                                "'no gain below' part is checked")
            return below
        above = self._gain_rule("fig7.gain_above_16MB", "fig7", "NBL(AUTO)", _is_fconc, rule,
                                min_bytes=threshold, threshold=1.02, paper_p=self.p_others)
        both = [v for v in (below, above) if v.verdict != NOT_MEASURED]
        below.ours = f"below: {below.ours}; above: {above.ours}"
        below.verdict = FAILS if any(v.verdict == FAILS for v in both) else HOLDS
        return below

    def fig11_gain(self) -> Verdict:
        rule = (f"holds if, for each library and algorithm of fig11, the best NBLxY / NBL >= "
                f"{GAIN} at every measured size >= 32 MB (or the largest measured), every p")
        rows, run = self.rows("fig11")
        if rows.empty:
            return self.verdict("fig11.gain", rule, ours="", verdict=NOT_MEASURED, run_id=run)
        parts = []
        for (lib, alg), part in rows.groupby(["library", "algorithm"]):
            v = self._gain_rule("fig11.gain", "fig11", f"NBL({alg})", _is_fconc, rule,
                                min_bytes=32 * MB, rows=part)
            parts.append((f"{lib} {alg}", v))
        measured = [v for _, v in parts if v.verdict != NOT_MEASURED]
        verdict = NOT_MEASURED if not measured else (
            FAILS if any(v.verdict == FAILS for v in measured) else HOLDS)
        return self.verdict("fig11.gain", rule, verdict=verdict, run_id=run,
                            ours="; ".join(f"{name}: {v.ours or v.verdict}" for name, v in parts),
                            notes=parts[0][1].notes)

    # table1 -----------------------------------------------------------------------------
    def table1_bandwidth_best(self) -> Verdict:
        rule = ("holds if max(NBL(RSA), NBL(RNG)) >= max(NBL(RDB), NBL(BIN)) at every measured "
                "size >= 1 MB (or the largest measured), for every library and p in fig1")
        rows, run = self.rows("fig1")
        if not rows.empty:
            rows = rows[rows["algorithm"].isin(["RSA", "RNG", "RDB", "BIN"])]
        if rows.empty:
            return self.verdict("table1.bandwidth_best", rule, ours="", verdict=NOT_MEASURED,
                                run_id=run)
        wide = rows.pivot_table(index=["library", "nprocs", "bytes"], columns="algorithm",
                                values="mbps").reset_index()
        good = [a for a in ("RSA", "RNG") if a in wide]
        bad = [a for a in ("RDB", "BIN") if a in wide]
        if not good or not bad:
            return self.verdict("table1.bandwidth_best", rule, ours="", verdict=NOT_MEASURED,
                                notes="needs one of RSA/RNG and one of RDB/BIN", run_id=run)
        sizes, note = sizes_at_least(wide["bytes"], MB)
        wide = wide[wide["bytes"].isin(sizes)].copy()
        wide["ratio"] = wide[good].max(axis=1) / wide[bad].max(axis=1)
        ok = (wide["ratio"] >= 1.0).all()
        ours = "max(RSA,RNG) / max(RDB,BIN): " + describe_ratios(wide, ("library", "nprocs"))
        for f in self.fits:
            ours += (f"; fitted on {f['library']}: alpha = {f['alpha_s'] * 1e6:.3g} us, "
                     f"beta = {f['beta_MBps']:.4g} MB/s, gamma = {f['gamma_MBps']:.4g} MB/s "
                     f"(median model error {f['median_relative_error']:.0%})")
        plat = self.ref["platform"]
        return self.verdict("table1.bandwidth_best", rule, ours=ours, run_id=run,
                            verdict=HOLDS if ok else FAILS,
                            notes="; ".join(n for n in (note, _p_note(rows, self.p_allreduce),
                                  f"paper's network: alpha = {plat['link_latency_s'] * 1e6:g} us, "
                                  f"link {plat['link_bandwidth_MBps']} MB/s") if n))

    def all(self) -> list[Verdict]:
        return [self.fig1_rng_best(), self.fig1_auto_rsa(), self.fig1_mpich_no_ring(),
                self.fig2_auto_fsize_gain(), self.fig2_rng_vs_auto(), self.fig2_rng_sustains(),
                self.fig3_auto_only_above_32MB(), self.fig3_rng_gain(), self.fig3_rng_vs_auto(),
                self.fig4_arithmetic("fig4.arithmetic_plain", "NBL"),
                self.fig4_arithmetic("fig4.arithmetic_pipelined", "NBLx4"),
                self.fig5_no_gain(), self.fig6_gain(), self.fig7_gain(), self.fig11_gain(),
                self.table1_bandwidth_best()]


def evaluate(frame, catalogue, run_id=None, fits=None, reference_path=PAPER_REFERENCE,
             metric="mean"):
    """Verdicts on the paper's metric (mean time) or, as a robustness check, the median."""
    reference = load_yaml(reference_path, "paper reference")
    return Findings(frame, catalogue, reference, run_id, fits, metric).all()
