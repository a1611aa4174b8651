"""Command line of the analysis: `python -m analysis <command> ...` (see --help of each).

  tidy     JSONL files/dirs -> tidy CSV (and Parquet)
  perflog  ReFrame perflogs -> CSV, one row per performance variable
  figures  tidy table -> fig1..fig11 PNG + PDF
  table1   tidy table -> fitted alpha/beta/gamma (JSON) + table1 PNG + PDF
  report   tidy table + figures + fitted parameters -> report.md (+ report.html)
  all      all of the above into one output directory

Exit status: 0 ok, 2 bad input (the message says what and how to fix it).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .common import CATALOGUE, PAPER_REFERENCE, AnalysisError, load_catalogue


def _labels(pairs: list[str]) -> dict[str, str]:
    labels = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise AnalysisError(f"--label {pair!r}: expected KEY=VALUE")
        labels[key] = value
    return labels


def cmd_tidy(args) -> None:
    from . import tidy
    required = args.require_label if args.require_label is not None else \
        list(tidy.DEFAULT_REQUIRED_LABELS)
    frame = tidy.load(args.inputs, args.schema, required, _labels(args.label), args.allow_empty)
    for path in tidy.write_table(frame, args.output, args.parquet):
        print(f"wrote {path} ({len(frame)} rows)")


def cmd_perflog(args) -> None:
    from . import perflog
    from .common import atomic_path
    frame = perflog.read(args.inputs, args.sep)
    with atomic_path(args.output) as tmp:
        frame.to_csv(tmp, index=False)
    print(f"wrote {args.output} ({len(frame)} performance values)")


def _table(args):
    from . import tidy
    return tidy.read_table(args.table)


def figure_ids(catalogue: dict, wanted: list[str] | None) -> list[str]:
    drawable = [f for f, e in catalogue.items() if "experiment" in e]
    for fig in wanted or []:
        if fig not in drawable:
            raise AnalysisError(f"--figure {fig}: not a drawable catalogue entry; choose from "
                                f"{', '.join(drawable)} (table1: use the table1 command)")
    return wanted or drawable


def cmd_figures(args, frame=None) -> None:
    from . import figures
    catalogue = load_catalogue(args.catalogue)
    frame = _table(args) if frame is None else frame
    for fig in figure_ids(catalogue, args.figure):
        result = figures.draw_figure(frame, catalogue, fig, args.out_dir, args.run_id,
                                     args.metric)
        state = f"run {result['run_id']}" if result["measured"] else "NOT MEASURED"
        print(f"{fig}: {state}: " + ", ".join(map(str, result["files"])))


def cmd_table1(args, frame=None) -> None:
    from . import table1
    catalogue = load_catalogue(args.catalogue)
    frame = _table(args) if frame is None else frame
    fits, rows = table1.fit_all(frame, catalogue, args.run_id, args.metric)
    params = args.params or Path(args.out_dir) / "table1_params.json"
    table1.write_params(fits, params)
    files = table1.draw(fits, rows, catalogue, args.out_dir)
    for fit in fits:
        print(f"table1 {fit['library']}: alpha={fit['alpha_s']:.3g} s "
              f"beta={fit['beta_MBps']:.4g} MB/s gamma={fit['gamma_MBps']:.4g} MB/s "
              f"(median relative error {fit['median_relative_error']:.0%})")
    if not fits:
        print("table1: NOT MEASURED (no plain NBL rows of RDB/RSA/RNG/BIN)")
    print("wrote " + ", ".join(map(str, [params, *files])))


def cmd_report(args, frame=None) -> None:
    from . import report
    catalogue = load_catalogue(args.catalogue)
    frame = _table(args) if frame is None else frame
    html = args.html if args.html else None
    for path in report.write(frame, catalogue, args.figures_dir, args.output, html,
                             args.params, args.reference, args.run_id, args.table):
        print(f"wrote {path}")


def cmd_all(args) -> None:
    from . import tidy
    out = Path(args.out_dir)
    args.output, args.table = out / "tidy.csv", str(out / "tidy.csv")
    args.parquet = out / "tidy.parquet" if args.parquet else None
    cmd_tidy(args)
    frame = tidy.read_table(args.table)
    args.out_dir = out / "figures"
    args.figure = None
    cmd_figures(args, frame)
    args.params = out / "table1_params.json"
    cmd_table1(args, frame)
    args.figures_dir, args.output, args.html = out / "figures", out / "report.md", out / "report.html"
    cmd_report(args, frame)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m analysis", description=__doc__,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = top.add_subparsers(dest="command", required=True)

    def common(p, table=True, out_dir=True):
        if table:
            p.add_argument("--table", required=True, help="tidy table (CSV or Parquet)")
        if out_dir:
            p.add_argument("--out-dir", required=True, help="directory for the figure files")
            p.add_argument("--metric", choices=("mean", "median"), default="mean",
                           help="time behind MB/s: mean (the paper's, default) or median")
        p.add_argument("--catalogue", default=CATALOGUE, help=f"default: {CATALOGUE}")
        p.add_argument("--run-id", help="use this run only (default: per figure, the latest)")

    def tidy_args(p, output=True):
        p.add_argument("inputs", nargs="+", help="pcbench JSONL files or directories "
                                                 "(searched recursively for *.jsonl)")
        if output:
            p.add_argument("-o", "--output", required=True, help="tidy CSV to write")
            p.add_argument("--parquet", help="also write this Parquet file (needs pyarrow)")
        p.add_argument("--schema", default=None, help="row JSON schema (default: "
                       "pipecoll/bench/pcbench-row.schema.json)")
        p.add_argument("--require-label", action="append", metavar="KEY",
                       help="label every row must carry (repeatable; default: algorithm, "
                            "library, run_id)")
        p.add_argument("--label", action="append", metavar="KEY=VALUE",
                       help="default for a label missing from a row (repeatable)")
        p.add_argument("--allow-empty", action="store_true",
                       help="no rows (e.g. every check of a group failed) is not an error: "
                            "write a table with columns only")

    p = sub.add_parser("tidy", help="JSONL -> validated tidy CSV")
    tidy_args(p)
    p.set_defaults(func=cmd_tidy)

    p = sub.add_parser("perflog", help="ReFrame perflogs -> CSV (one row per perf variable)")
    p.add_argument("inputs", nargs="+", help="perflog files or directories (*.log)")
    p.add_argument("-o", "--output", required=True, help="CSV to write")
    p.add_argument("--sep", default="|", help="field delimiter of the perflog (default: |)")
    p.set_defaults(func=cmd_perflog)

    p = sub.add_parser("figures", help="paper-style figures (PNG + PDF)")
    common(p)
    p.add_argument("--figure", action="append", help="catalogue id (repeatable; default: all)")
    p.set_defaults(func=cmd_figures)

    p = sub.add_parser("table1", help="fit the Table 1 cost models, draw them")
    common(p)
    p.add_argument("--params", help="fitted parameters JSON (default: OUT_DIR/table1_params.json)")
    p.set_defaults(func=cmd_table1)

    p = sub.add_parser("report", help="findings report (Markdown, optional HTML)")
    common(p, out_dir=False)
    p.add_argument("--figures-dir", required=True, help="where figures/table1 wrote the PNGs")
    p.add_argument("--params", help="table1 parameters JSON (from the table1 command)")
    p.add_argument("--reference", default=PAPER_REFERENCE, help="paper reference values")
    p.add_argument("-o", "--output", required=True, help="Markdown report to write")
    p.add_argument("--html", help="also write this HTML report (same directory)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("all", help="tidy + figures + table1 + report into OUT_DIR")
    tidy_args(p, output=False)
    p.add_argument("--out-dir", required=True)
    p.add_argument("--parquet", action="store_true", help="also write tidy.parquet")
    p.add_argument("--catalogue", default=CATALOGUE)
    p.add_argument("--reference", default=PAPER_REFERENCE)
    p.add_argument("--run-id")
    p.add_argument("--metric", choices=("mean", "median"), default="mean",
                   help="time behind the figures' MB/s and the table1 fit (default: mean)")
    p.set_defaults(func=cmd_all)
    return top


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if getattr(args, "schema", "unset") is None:
        from .tidy import ROW_SCHEMA
        args.schema = ROW_SCHEMA
    try:
        args.func(args)
    except AnalysisError as exc:
        print(f"python -m analysis {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
