"""The findings report: machine, what differs from the paper, every finding with our number
next to the paper's and a verdict, the figures, the fitted Table 1 parameters.

Built once as a list of blocks and rendered twice, to Markdown and to plain HTML (no extra
package), both written atomically. Figures are linked by paths relative to the report.
"""
from __future__ import annotations

import datetime as dt
import html
import json
import os
import socket
from pathlib import Path

import pandas as pd

from .common import AnalysisError, load_yaml, size_label, write_text_atomic, PAPER_REFERENCE
from .findings import FAILS, HOLDS, NOT_MEASURED, evaluate
from .table1 import EQUATIONS


def _join(values) -> str:
    return ", ".join(sorted({str(v) for v in values if str(v) not in ("", "nan")})) or "-"


def machine_blocks(frame: pd.DataFrame, reference: dict) -> list:
    hosts = sorted(set(frame["host"].astype(str)))
    cores = ""
    if socket.gethostname() in hosts:
        cores = f"{os.cpu_count()} (read where this report was made, the same host)"
    libs = (frame.groupby("library")["mpi_library"].agg(_join).reset_index()
            .itertuples(index=False))
    sizes = sorted(set(frame["bytes"].astype(int)))
    plat = reference["platform"]
    rows = [
        ["host", _join(hosts), f"{plat['nodes']} nodes, {plat['cpu']}"],
        ["cores", cores or "not recorded in the rows", "28 per node, 1 process per node"],
        ["network", "shared memory within one host (ranks may be oversubscribed)"
         if len(hosts) == 1 else f"{len(hosts)} hosts; the interconnect is not in the rows",
         f"{plat['network']}, {plat['link_latency_s'] * 1e6:g} us, "
         f"{plat['link_bandwidth_MBps']} MB/s links"],
        ["MPI libraries", "; ".join(f"{lib}: {text}" for lib, text in libs), plat["libraries"]],
        ["MPI standard version", _join(frame["mpi_version"]), "-"],
        ["process counts", _join(frame["nprocs"].astype(int)),
         f"{_join(plat['nprocs']['allreduce'])} (allreduce), "
         f"{_join(plat['nprocs']['others'])} (others)"],
        ["message sizes", f"{size_label(sizes[0])} .. {size_label(sizes[-1])}" if sizes else "-",
         f"up to {size_label(plat['max_bytes'])}"],
        ["pipecoll version", _join(frame["pipecoll_version"]), "-"],
        ["run id(s)", _join(frame["run_id"]), "-"],
        ["measured (UTC)", f"{frame['timestamp'].min()} .. {frame['timestamp'].max()}"
         if len(frame) else "-", "-"],
    ]
    return [("h2", "Machine and software"),
            ("table", ["", "here", f"paper ({plat['source']})"], rows)]


def build(frame: pd.DataFrame, catalogue: dict, figures_dir, report_path, params=None,
          reference_path=PAPER_REFERENCE, run_id=None, table_path=None) -> list:
    reference = load_yaml(reference_path, "paper reference")
    fits = (params or {}).get("fits", [])
    verdicts = evaluate(frame, catalogue, run_id, fits, reference_path)
    # The same rules on median times: a verdict that flips is decided by a few stalls.
    robust = {v.id: v for v in evaluate(frame, catalogue, run_id, fits, reference_path,
                                         metric="median")}
    disturbed = int(frame["disturbed"].astype(bool).sum()) if "disturbed" in frame else 0
    counts = {v: sum(1 for x in verdicts if x.verdict == v) for v in (HOLDS, FAILS, NOT_MEASURED)}
    failed_checks = int((frame["check"] == "fail").sum()) if "check" in frame else 0
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    blocks = [
        ("h1", "Findings report: pipelined MPI collectives (Castello et al. 2021)"),
        ("p", f"Generated {now} from {table_path or 'the tidy table'} ({len(frame)} "
              f"measurements). Every number of ours comes from that table; the paper's are "
              f"reference values from analysis/paper_reference.yaml, labelled 'paper'."),
        ("p", f"Verdicts: {counts[HOLDS]} hold, {counts[FAILS]} do not hold, "
              f"{counts[NOT_MEASURED]} not measured here."
              + (f" {failed_checks} measurement(s) failed their result check and are left "
                 "out of figures and verdicts." if failed_checks else "")),
        ("p", "Our numbers use the paper's metric, MB/s = bytes / 1e6 / MEAN time of one "
              "collective. On a shared machine a few stalled repetitions can dominate a mean: "
              f"{disturbed} of {len(frame)} measurements have a mean more than twice their "
              "median (hollow markers in the figures). The last column applies the same rule "
              "to median times; where the two verdicts differ, the finding is decided by "
              "stalls, not by the algorithm."),
    ]
    blocks += machine_blocks(frame, reference)
    blocks += [
        ("h2", "What differs from the paper"),
        ("ul", [
            ("The paper ran one process per node on 9 InfiniBand EDR nodes; here all ranks "
             "share one host's memory and cores. Pipelining pays off by overlapping the "
             "reduction arithmetic with network transfers; with shared memory on few cores "
             "there is little to overlap, so most of the paper's gains are not expected to "
             "hold here.") if frame["host"].nunique() == 1 else
            ("The paper ran one process per node on 9 InfiniBand EDR nodes; these rows come "
             f"from {frame['host'].nunique()} hosts (see the machine table)."),
            "Process counts and message sizes are the run configuration's (see the machine "
            "table). Where a finding's size threshold (e.g. 32 MB) was not reached, the rule "
            "is evaluated at the largest size measured and the finding's notes say so.",
            "Comparisons are ratios between series of the same run (the latest run of each "
            "figure), never across runs: on this shared machine run-to-run spread is up to 2x.",
            "The NOOP variant is a user-defined no-op MPI_Op, not the paper's patched Open MPI.",
        ]),
        ("h2", "Summary"),
        ("table", ["finding", "paper", "ours (mean time)", "verdict", "verdict (median time)"],
         [[v.id, v.claim, v.ours or "-", v.verdict, robust[v.id].verdict] for v in verdicts]),
    ]
    report_dir = Path(report_path).resolve().parent
    by_figure: dict[str, list] = {}
    for v in verdicts:
        by_figure.setdefault(v.figure, []).append(v)
    for fig_id, entry in catalogue.items():
        blocks.append(("h2", f"{fig_id}: {entry['title']}"))
        image = Path(figures_dir) / f"{fig_id}.png"
        if image.is_file():
            blocks.append(("img", os.path.relpath(image.resolve(), report_dir), entry["title"]))
        else:
            blocks.append(("p", f"(figure {image} was not drawn)"))
        if fig_id == "table1":
            blocks += table1_blocks(fits)
        for v in by_figure.get(fig_id, []):
            blocks += [("h3", f"{v.id}: {v.verdict}"),
                       ("ul", [f"paper ({v.source}): {v.claim}", f"rule: {v.rule}",
                               f"ours: {v.ours or '-'}",
                               f"ours with median times: {robust[v.id].ours or '-'} "
                               f"({robust[v.id].verdict})",
                               *([f"notes: {v.notes}"] if v.notes else []),
                               *([f"run: {v.run_id}"] if v.run_id else [])])]
    return blocks


def table1_blocks(fits: list[dict]) -> list:
    eq_rows = [[alg, t["latency"], t["bandwidth"], t["arithmetic"]] for alg, t in EQUATIONS.items()]
    blocks = [("p", "Paper's Table 1 (Sec. 3.2): T = A alpha + B / beta + C / gamma with n the "
                    "message size (bytes here) and log p = ceil(log2 p); NOOP rows have no "
                    "arithmetic term. Fitted by weighted (relative-error) non-negative least "
                    "squares over the plain NBL rows of fig1 and fig4."),
              ("table", ["Alg.", "latency x alpha", "bandwidth x 1/beta",
                         "arithmetic x 1/gamma"], eq_rows)]
    if not fits:
        return blocks + [("p", "No rows to fit: not measured here.")]
    rows = [[f["library"], f.get("metric", "mean"), f"{f['alpha_s'] * 1e6:.3g} us", f"{f['beta_MBps']:.4g} MB/s",
             f"{f['gamma_MBps']:.4g} MB/s", f["gamma_from"],
             f"{f['median_relative_error']:.0%}", _join(f["nprocs"]), str(f["rows"]),
             _join(f["host"]), _join(f["mpi_library"]), _join(f["run_id"])] for f in fits]
    return blocks + [("table", ["library", "time", "alpha", "beta", "gamma", "gamma from",
                                "median model error", "p", "rows", "host", "MPI", "run"], rows)]


# -- rendering -------------------------------------------------------------------------------
def _md_cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(blocks: list) -> str:
    out = []
    for block in blocks:
        kind = block[0]
        if kind in ("h1", "h2", "h3"):
            out.append("#" * int(kind[1]) + " " + block[1])
        elif kind == "p":
            out.append(block[1])
        elif kind == "ul":
            out.append("\n".join(f"- {item}" for item in block[1]))
        elif kind == "img":
            out.append(f"![{block[2]}]({block[1]})")
        elif kind == "table":
            header, rows = block[1], block[2]
            lines = ["| " + " | ".join(map(_md_cell, header)) + " |",
                     "| " + " | ".join("---" for _ in header) + " |"]
            lines += ["| " + " | ".join(map(_md_cell, r)) + " |" for r in rows]
            out.append("\n".join(lines))
    return "\n\n".join(out) + "\n"


_STYLE = ("body{font-family:sans-serif;max-width:70em;margin:auto;padding:1em}"
          "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;"
          "padding:.3em .5em;vertical-align:top;font-size:90%}img{max-width:100%}"
          ".holds{color:#070}.fails{color:#a00}.nm{color:#777}")
_CLASS = {HOLDS: "holds", FAILS: "fails", NOT_MEASURED: "nm"}


def to_html(blocks: list) -> str:
    esc = html.escape
    out = []
    for block in blocks:
        kind = block[0]
        if kind in ("h1", "h2", "h3"):
            out.append(f"<{kind}>{esc(block[1])}</{kind}>")
        elif kind == "p":
            out.append(f"<p>{esc(block[1])}</p>")
        elif kind == "ul":
            out.append("<ul>" + "".join(f"<li>{esc(i)}</li>" for i in block[1]) + "</ul>")
        elif kind == "img":
            out.append(f'<p><img src="{esc(block[1])}" alt="{esc(block[2])}"></p>')
        elif kind == "table":
            head = "".join(f"<th>{esc(str(h))}</th>" for h in block[1])
            body = "".join(
                "<tr>" + "".join(
                    f'<td class="{_CLASS[c]}">{esc(str(c))}</td>' if c in _CLASS
                    else f"<td>{esc(str(c))}</td>" for c in r) + "</tr>" for r in block[2])
            out.append(f"<table><tr>{head}</tr>{body}</table>")
    title = esc(blocks[0][1]) if blocks else "report"
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title>"
            f"<style>{_STYLE}</style></head><body>\n" + "\n".join(out) + "\n</body></html>\n")


def write(frame, catalogue, figures_dir, markdown_path, html_path=None, params_path=None,
          reference_path=PAPER_REFERENCE, run_id=None, table_path=None) -> list[Path]:
    params = None
    if params_path:
        try:
            params = json.loads(Path(params_path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise AnalysisError(f"fitted parameters {params_path} do not exist (make them "
                                "with `python -m analysis table1`)") from None
    blocks = build(frame, catalogue, figures_dir, markdown_path, params, reference_path,
                   run_id, table_path)
    write_text_atomic(markdown_path, to_markdown(blocks))
    written = [Path(markdown_path)]
    if html_path:
        if Path(html_path).resolve().parent != Path(markdown_path).resolve().parent:
            raise AnalysisError("--html must be in the same directory as the Markdown report "
                                "(figure links are relative to it)")
        write_text_atomic(html_path, to_html(blocks))
        written.append(Path(html_path))
    return written
