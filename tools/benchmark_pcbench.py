#!/usr/bin/env python3
"""Benchmark pcbench on this machine (not a test): MPI_Allreduce BL, NBL and NBLxY under
every MPI library, SUM and NOOP, plus the cost of the LD_PRELOAD interposer in bl mode.

    build/venv/bin/python tools/benchmark_pcbench.py            # the full run (~15 min)
    build/venv/bin/python tools/benchmark_pcbench.py --quick    # a 2-minute smoke run

Raw pcbench rows (JSON Lines, pipecoll/bench/pcbench-row.schema.json) go to
results/benchmarks/<UTC timestamp>/raw/; the printed report is saved beside them as
report.txt, with manifest.json (command, settings, host). Ratios compare variants measured
in the same pcbench run (the variants of one size run back to back), never across runs.
Exit status: 0 when every run finished and every checked result was right, 1 otherwise.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from mpistack import algorithms, libraries  # noqa: E402

DEFAULT_VARIANTS = "blocking,nonblocking,fconc:2,fconc:4,fconc:8"
RUN_TIMEOUT = 1800  # seconds per pcbench launch; a hang must not stop the whole benchmark


class BenchmarkError(Exception):
    pass


def short_name(row: dict) -> str:
    """The paper's names: BL, NBL, NBLxY, XB."""
    if row["variant"] == "blocking":
        return "BL"
    if row["variant"] == "nonblocking":
        return "NBL"
    if row["variant"] == "fconc":
        return f"NBLx{row['segments_requested']}"
    return f"{human_bytes(row['segment_bytes_requested'])}B"


def variant_name(text: str) -> str:
    """short_name for a --variant value (blocking, nonblocking, fconc:N, fsize:BYTES)."""
    kind, _, value = text.partition(":")
    if kind == "fsize":
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(value[-1:].upper(), 1)
        value = int(value.rstrip("KMGkmg")) * scale
    return short_name({"variant": kind, "segments_requested": value,
                       "segment_bytes_requested": value})


def human_bytes(n: int) -> str:
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def run_pcbench(lib, nprocs: int, argv: list[str], log, env: dict | None = None,
                table: Path | None = None, timeout: float | None = None) -> tuple[int, str]:
    """Run one pcbench job in its own session; return (exit status, stderr). Its stdout
    (pcbench's table, line by line: the progress of a long sweep) goes to `table`."""
    env = dict(env or lib.environment())
    env.pop("PCBENCH_CORRUPT_FOR_TEST", None)
    command = lib.launch_command(nprocs, argv)
    changed = " ".join(f"{k}={v}" for k, v in sorted(env.items()) if os.environ.get(k) != v)
    log(f"$ {changed} {' '.join(map(str, command))}")
    stdout = open(table, "w") if table else subprocess.DEVNULL
    proc = subprocess.Popen(command, env=env, stdout=stdout, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    if table:
        stdout.close()  # the child holds its own copy
    try:
        _, err = proc.communicate(timeout=RUN_TIMEOUT if timeout is None else timeout)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (see main): do not leave the job running
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
        raise
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        time.sleep(5)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        return -1, f"timed out after {RUN_TIMEOUT if timeout is None else timeout} s"
    return proc.returncode, err


def read_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ---- the interposer's cost at 8 B ---------------------------------------------------------
def measure_overhead(lib, args, raw: Path, log) -> dict:
    """Alternate plain and LD_PRELOAD runs of the same 8 B MPI_Allreduce (pcbench BL) so
    drifting background load hits both alike; compare medians pair by pair."""
    pcbench = lib.pipecoll_build / "pcbench"
    preload = lib.pipecoll_build / "libpipecoll_preload.so"
    if not preload.exists():
        raise BenchmarkError(f"{preload} missing: run `python3 tools/bootstrap.py --steps pipecoll`")
    common = ["--variant", "blocking", "--min-bytes", "8", "--max-bytes", "8",
              "--warmup", str(args.overhead_iters // 10), "--iters", str(args.overhead_iters),
              "--quiet", "--label", f"library={lib.name}"]
    # Prove the interposer is really loaded (and in bl mode) before timing it.
    status, err = run_pcbench(lib, 2, ["env", f"LD_PRELOAD={preload}", "PIPECOLL_VERBOSE=1",
                                       "PIPECOLL_MODE=bl", pcbench, "--max-bytes", "8",
                                       "--iters", "3", "--quiet"], log)
    if status != 0 or "interposer: allreduce=bl" not in err:
        raise BenchmarkError(f"{lib.display}: the interposer did not report itself loaded in bl "
                             f"mode (exit {status}):\n{err}")
    pairs = []
    for k in range(args.overhead_pairs):
        medians = {}
        for kind in ("plain", "preload"):
            out = raw / f"overhead-{lib.name}-{kind}-{k}.jsonl"
            prefix = ["env", "PIPECOLL_MODE=bl"] + ([f"LD_PRELOAD={preload}"] if kind == "preload" else [])
            status, err = run_pcbench(lib, 2, [*prefix, pcbench, *common, "--label",
                                               f"interposer={kind}", "--output", out], log)
            if status != 0:
                raise BenchmarkError(f"{lib.display} overhead run ({kind}) failed with "
                                     f"status {status}:\n{err}")
            (row,) = read_rows(out)
            medians[kind] = (row["time_median_s"], row["time_mean_s"])
        pairs.append(medians)
    ratios_median = [p["preload"][0] / p["plain"][0] for p in pairs]
    ratios_mean = [p["preload"][1] / p["plain"][1] for p in pairs]
    return {"library": lib.name, "display": lib.display,
            "plain_median_us": statistics.median(p["plain"][0] * 1e6 for p in pairs),
            "preload_median_us": statistics.median(p["preload"][0] * 1e6 for p in pairs),
            "ratio_of_medians": ratios_median, "ratio_of_means": ratios_mean}


# ---- the sweep ----------------------------------------------------------------------------
def algorithm_environment(lib, op: str, nprocs: int, variants: list[str], log):
    """AUTO for SUM; for NOOP what mpistack.algorithms forces so that a user op keeps SUM's
    algorithm (the NOOP trap). Returns (env, labels, variants that can run, notes)."""
    env, labels, notes, runnable = lib.environment(), {}, [], list(variants)
    for blocking, key in ((False, "algorithm_nonblocking"), (True, "algorithm_blocking")):
        uses = [v for v in runnable if (v == "blocking") == blocking]
        if not uses:
            continue
        try:
            sel = algorithms.select(lib.name, "allreduce", blocking, "AUTO", op, nprocs=nprocs)
        except algorithms.UserOpRefusedError as error:
            runnable = [v for v in runnable if v not in uses]
            notes.append(f"{lib.name} p={nprocs} op={op}: {', '.join(uses)} not run: {error}")
            log(f"  {notes[-1]}")
            continue
        env = sel.apply(env)
        labels[key] = sel.algorithm
        if sel.env:
            labels[key + "_env"] = " ".join(f"{k}={v}" for k, v in sorted(sel.env.items()))
    return env, labels, runnable, notes


def sweep(lib, nprocs: int, op: str, args, raw: Path, log, plan) -> tuple[Path, int, str]:
    out = raw / f"sweep-{lib.name}-p{nprocs}-{op}.jsonl"
    env, labels, variants, _ = plan
    if not variants:
        return out, 0, ""
    argv = [lib.pipecoll_build / "pcbench", "--collective", "allreduce", "--variant", ",".join(variants),
            "--op", op, "--dtype", "float", "--min-bytes", args.min_bytes, "--max-bytes",
            args.max_bytes, "--warmup", str(args.warmup), "--iters", str(args.iters),
            "--time-budget", str(args.time_budget), "--output", out,
            "--label", f"library={lib.name}", "--label", "algorithm=AUTO",
            "--label", f"benchmark={args.stamp}"]
    for key, value in labels.items():
        argv += ["--label", f"{key}={value}"]
    status, err = run_pcbench(lib, nprocs, argv, log, env, table=out.with_suffix(".txt"),
                              timeout=args.run_timeout)
    return out, status, err


def format_report(rows: list[dict], overhead: list[dict], variants: list[str],
                  failures: list[str], settings: str, notes: list[str],
                  metric: str = "mean") -> str:
    def seconds(row: dict) -> float:
        return row["time_mean_s"] if metric == "mean" else row["time_median_s"]

    def mbps(row: dict) -> float:  # the paper's metric, from the mean or the median time
        return row["bytes"] / 1e6 / seconds(row)

    lines = [f"# pcbench benchmark: MPI_Allreduce, float, AUTO algorithms (NOOP: the algorithm "
             f"mpistack.algorithms forces, see below); {settings}",
             f"# MB/s = bytes/1e6/{metric} time ({'the paper' if metric == 'mean' else 'robust'} metric); X/NBL = MB/s of X divided by NBL's, same "
             "run and size; check: exact result check (skipped for NOOP)"]
    names = [variant_name(v) for v in variants]
    ratio_names = [n for n in names if n != "NBL"]
    header = (f"{'library':<10}{'p':>3} {'op':<5}{'size':>6} "
              + "".join(f"{n + ' MB/s':>12}" for n in names)
              + "".join(f"{n + '/NBL':>10}" for n in ratio_names) + "  check")
    groups: dict[tuple, dict] = {}
    for row in rows:
        key = (row["labels"]["library"], row["nprocs"], row["op"], row["bytes"])
        groups.setdefault(key, {})[short_name(row)] = row
    order = {name: i for i, name in enumerate(l.name for l in libraries.load().values())}
    previous = None
    summary: dict[tuple, dict[str, list[float]]] = {}
    lines.append(header)
    for key in sorted(groups, key=lambda k: (order.get(k[0], 99), k[1], k[2] != "sum", k[3])):
        lib, p, op, size = key
        if previous is not None and previous != key[:3]:
            lines.append("")
        previous = key[:3]
        cells = groups[key]
        nbl = cells.get("NBL")
        text = f"{lib:<10}{p:>3} {op:<5}{human_bytes(size):>6} "
        text += "".join(f"{mbps(cells[n]):>12.1f}" if n in cells else f"{'-':>12}" for n in names)
        for n in ratio_names:
            if n in cells and nbl:
                ratio = mbps(cells[n]) / mbps(nbl)
                summary.setdefault(key[:3], {}).setdefault(n, []).append(ratio)
                text += f"{ratio:>10.2f}"
            else:
                text += f"{'-':>10}"
        checks = {c["check"] for c in cells.values()}
        text += "  " + ("pass" if checks == {"pass"} else "/".join(sorted(checks)))
        lines.append(text)

    lines += ["", "# geometric mean over sizes of MB/s ratio to NBL (>1: faster than NBL)"]
    lines.append(f"{'library':<10}{'p':>3} {'op':<5}" + "".join(f"{n + '/NBL':>10}" for n in ratio_names))
    for key, per in summary.items():
        lines.append(f"{key[0]:<10}{key[1]:>3} {key[2]:<5}" + "".join(
            f"{math.exp(statistics.fmean(map(math.log, per[n]))):>10.2f}" if n in per else f"{'-':>10}"
            for n in ratio_names))

    # NOOP vs SUM: what share of the time the arithmetic is (fig4's question). Separate runs,
    # so indicative only; the algorithms in force are listed after the table.
    by_key = {(r["labels"]["library"], r["nprocs"], short_name(r), r["bytes"], r["op"]): r for r in rows}
    share_lines = []
    for (lib, p, name, size, op), row in sorted(by_key.items(), key=lambda kv: (order.get(kv[0][0], 99),) + kv[0][1:]):
        if op != "sum" or (lib, p, name, size, "noop") not in by_key or size != max(
                r["bytes"] for r in rows):
            continue
        noop = by_key[(lib, p, name, size, "noop")]
        share_lines.append(f"{lib:<10}{p:>3} {name:>7} {human_bytes(size):>6} "
                           f"{seconds(row) * 1e3:>10.2f} {seconds(noop) * 1e3:>10.2f} "
                           f"{1 - seconds(noop) / seconds(row):>+9.0%}")
    if share_lines:
        lines += ["", f"# SUM vs NOOP at the largest size, {metric} times (separate runs)",
                  f"{'library':<10}{'p':>3} {'variant':>7} {'size':>6} {'sum ms':>10} {'noop ms':>10} "
                  f"{'1-noop/sum':>9}", *share_lines]

    algos = sorted({(r["labels"]["library"], r["op"], k.removeprefix("algorithm_"), v)
                    for r in rows for k, v in r["labels"].items()
                    if k in ("algorithm_blocking", "algorithm_nonblocking")},
                   key=lambda t: (order.get(t[0], 99), t[1] != "sum", t[2]))
    if algos or notes:
        lines += ["", "# algorithms in force (mpistack.algorithms; AUTO = the library's choice)"]
        lines += [f"{lib:<10} {op:<5}{kind:<12} {algo}" for lib, op, kind, algo in algos]
        lines += [f"- {n}" for n in notes]

    if overhead:
        lines += ["", "# interposer cost: 8 B MPI_Allreduce (pcbench BL, p=2), plain vs "
                  "LD_PRELOAD=libpipecoll_preload.so PIPECOLL_MODE=bl, alternating runs",
                  f"{'library':<10}{'plain us':>10}{'preload us':>12}{'ratio (median of pairs)':>25}"
                  f"{'pairs: ratio of medians':>26}"]
        for o in overhead:
            ratios = " ".join(f"{r:.3f}" for r in o["ratio_of_medians"])
            lines.append(f"{o['library']:<10}{o['plain_median_us']:>10.3f}{o['preload_median_us']:>12.3f}"
                         f"{statistics.median(o['ratio_of_medians']):>25.3f}   {ratios}")
    if failures:
        lines += ["", "# FAILURES"] + [f"- {f}" for f in failures]
    return "\n".join(lines) + "\n"


def report_only(out_dir: Path, metric: str) -> int:
    """Re-print an earlier run's report (e.g. with --metric median) from its raw rows."""
    manifest_path = out_dir / "manifest.json"
    if not manifest_path.exists():
        print(f"--report-only {out_dir}: no manifest.json there (not a benchmark directory)",
              file=sys.stderr)
        return 2
    manifest = json.loads(manifest_path.read_text())
    rows = [row for path in sorted((out_dir / "raw").glob("sweep-*.jsonl"))
            for row in read_rows(path)]
    s = manifest["settings"]
    settings = (f"p={s['nprocs']}, {s['min_bytes']}..{s['max_bytes']}, ops {s['ops']}, time "
                f"budget {s['time_budget']} s and at most {s['iters']} repetitions; re-printed")
    print(format_report(rows, manifest.get("overhead", []), s["variants"].split(","), [],
                        settings, manifest.get("notes", []), metric), end="")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--mpis", default=None, help="comma list (default: PCREPRO_MPIS or all)")
    parser.add_argument("--nprocs", default="2,4", help="comma list of process counts (default 2,4)")
    parser.add_argument("--min-bytes", default="1M")
    parser.add_argument("--max-bytes", default="256M")
    parser.add_argument("--variants", default=DEFAULT_VARIANTS)
    parser.add_argument("--ops", default="sum,noop")
    parser.add_argument("--time-budget", type=float, default=0.5,
                        help="seconds of timed repetitions per size and variant (default 0.5)")
    parser.add_argument("--iters", type=int, default=10,
                        help="at most this many timed repetitions (default 10)")
    parser.add_argument("--warmup", type=int, default=0,
                        help="extra untimed repetitions; pcbench already runs one untimed "
                             "(checked) collective before timing (default 0)")
    parser.add_argument("--overhead-iters", type=int, default=20000)
    parser.add_argument("--overhead-pairs", type=int, default=5)
    parser.add_argument("--metric", choices=("mean", "median"), default="mean",
                        help="time behind MB/s in the table: mean (the paper's, default) or "
                             "median (robust to the outliers of a loaded machine)")
    parser.add_argument("--report-only", type=Path, metavar="DIR",
                        help="print the report of an earlier run from DIR/raw (no new runs)")
    parser.add_argument("--run-timeout", type=float, default=RUN_TIMEOUT,
                        help=f"seconds before one pcbench job is stopped and reported as failed "
                             f"(default {RUN_TIMEOUT})")
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--skip-sweep", action="store_true")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: p=2, 1M..8M, SUM only, 2 overhead pairs of 5000")
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="default results/benchmarks/<UTC timestamp>")
    args = parser.parse_args(argv)
    if args.quick:
        args.nprocs, args.max_bytes, args.ops = "2", "8M", "sum"
        args.overhead_pairs, args.overhead_iters = 2, 5000
    try:
        nprocs = [int(p) for p in args.nprocs.split(",")]
        if any(p < 1 for p in nprocs):
            raise ValueError
    except ValueError:
        parser.error(f"--nprocs {args.nprocs!r}: needs a comma list of positive integers")
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    if not ops or set(ops) - {"sum", "noop"}:
        parser.error(f"--ops {args.ops!r}: use sum, noop or sum,noop")
    try:
        libs = libraries.selected(args.mpis)
    except libraries.UnknownLibraryError as error:
        parser.error(str(error))
    missing = [str(lib.pipecoll_build / "pcbench") for lib in libs
               if not (lib.pipecoll_build / "pcbench").exists()]
    if missing:
        parser.error(f"pcbench not built ({', '.join(missing)}): run "
                     f"`python3 tools/bootstrap.py --steps pipecoll`")

    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM ends runs like Ctrl-C
    if args.report_only:
        return report_only(args.report_only, args.metric)

    args.stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out_dir = args.out_dir or REPO / "results" / "benchmarks" / args.stamp
    raw = out_dir / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    log_file = open(out_dir / "commands.log", "a")

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)
        print(message, file=log_file, flush=True)

    settings = (f"p={args.nprocs}, {args.min_bytes}..{args.max_bytes}, ops {','.join(ops)}, "
                f"time budget {args.time_budget} s and at most {args.iters} repetitions per "
                f"size and variant, warm-up {args.warmup} + 1 checked run; host "
                f"{platform.node()}, {os.cpu_count()} CPUs")
    manifest = {"command": [sys.executable, *sys.argv], "started": args.stamp,
                "settings": {k: v for k, v in vars(args).items() if k != "out_dir"},
                "libraries": [lib.name for lib in libs], "host": platform.node(),
                "cpus": os.cpu_count(), "loadavg_at_start": os.getloadavg()}
    write_atomically(out_dir / "manifest.json", json.dumps(manifest, indent=2, default=str) + "\n")

    failures: list[str] = []
    overhead: list[dict] = []
    # Every algorithm selection is made before anything runs: a table error stops the
    # benchmark at once instead of after the first half of the runs.
    plans, notes = {}, []
    if not args.skip_sweep:
        for lib in libs:
            for p in nprocs:
                for op in ops:
                    try:
                        plan = algorithm_environment(lib, op, p, args.variants.split(","), log)
                    except algorithms.AlgorithmError as error:
                        parser.error(f"{lib.name} p={p} op={op}: {error}")
                    plans[lib.name, p, op] = plan
                    notes.extend(plan[3])
    if not args.skip_overhead:
        for lib in libs:  # first: the 8 B comparison is the most sensitive to the machine's state
            try:
                overhead.append(measure_overhead(lib, args, raw, log))
            except BenchmarkError as error:
                failures.append(str(error))

    rows: list[dict] = []
    if not args.skip_sweep:
        for lib in libs:
            for p in nprocs:
                for op in ops:
                    started = time.monotonic()
                    out, status, err = sweep(lib, p, op, args, raw, log, plans[lib.name, p, op])
                    got = read_rows(out)
                    rows += got
                    log(f"  {lib.name} p={p} {op}: {len(got)} rows, exit {status}, "
                        f"{time.monotonic() - started:.0f} s")
                    if status != 0:
                        failures.append(f"{lib.display} p={p} op={op}: pcbench exit {status}: "
                                        f"{err.strip()[-2000:]}")
    failed_checks = [r for r in rows if r["check"] == "fail"]
    if failed_checks:
        failures.append(f"{len(failed_checks)} rows with check=fail")

    manifest["finished"] = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    manifest["loadavg_at_end"] = os.getloadavg()
    manifest["overhead"] = overhead
    write_atomically(out_dir / "manifest.json", json.dumps(manifest, indent=2, default=str) + "\n")
    manifest["notes"] = notes
    write_atomically(out_dir / "manifest.json", json.dumps(manifest, indent=2, default=str) + "\n")
    report = format_report(rows, overhead, args.variants.split(","), failures, settings, notes,
                           args.metric)
    write_atomically(out_dir / "report.txt", report)
    print(report)
    print(f"raw rows and report: {out_dir}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("benchmark_pcbench: interrupted; the running pcbench job was stopped, rows of "
              "finished runs stay in the output directory", file=sys.stderr)
        sys.exit(130)
