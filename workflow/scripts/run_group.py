#!/usr/bin/env python3
"""Run the ReFrame checks of one figure group, keeping every passing check's rows.

    run_group.py --config results/<run_id>/config.yaml --group fig3 --run-dir results/<run_id>

Layout under the run folder:
  reframe/<group>/attempt-<N>/   one ReFrame run: stage/, output/, perflogs/, reframe.log,
                                 report.json (a new attempt never touches an older one)
  data/<group>/<case>.jsonl      the rows of every check that PASSED (copied from ReFrame's
                                 output folder), with <case>.provenance.json beside them
  reframe/<group>/complete.json  written only when every case of the group has passed

A case that already has rows in data/ is not run again, so after a failure a re-run redoes
only the failed checks. Exit status 0 when the group is complete, 1 when any check failed
(the passing ones are kept), 2 for a bad invocation or configuration.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(REPO_ROOT / "reframe_checks"))
import cases as pcases  # noqa: E402

CHECK_FILE = REPO_ROOT / "reframe_checks" / "pcbench_sweep.py"
ROWS = "pcbench.jsonl"
PROVENANCE = "provenance.json"


def say(message: str) -> None:
    print(f"[run_group] {message}", flush=True)


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def copy_atomic(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    shutil.copyfile(source, tmp)
    os.replace(tmp, target)


def next_attempt(group_dir: Path) -> Path:
    numbers = [int(m.group(1)) for p in group_dir.glob("attempt-*")
               if (m := re.fullmatch(r"attempt-(\d+)", p.name))]
    return group_dir / f"attempt-{max(numbers, default=0) + 1}"


def reframe_command(config: dict, config_path: Path, todo: list[pcases.Case], run_id: str,
                    report: Path) -> list[str]:
    reframe = Path(sys.executable).parent / "reframe"
    site = config["site"]
    # Select exactly the cases still missing (names have their spaces removed by ReFrame).
    names = "|".join(re.escape(case.id) for case in todo)
    return [str(reframe if reframe.exists() else "reframe"),
            "-C", str(REPO_ROOT / site["config"]), "--system", site["system"],
            "-c", str(CHECK_FILE), "-n", f"%case=({names})$",
            "-S", f"run_id={run_id}", "--report-file", str(report),
            *config["reframe"]["extra_args"], "-r"]


def harvest(report_path: Path, data_dir: Path, expected: dict[str, pcases.Case]) -> dict[str, dict]:
    """Copy the rows of every passing check into data_dir; return what failed and why."""
    report = json.loads(report_path.read_text(encoding="utf-8"))
    failures = {}
    for run in report.get("runs", []):
        for test in run.get("testcases", []):
            case_id = test["display_name"].split("%case=")[-1].strip()
            if case_id not in expected:
                continue
            if test["result"] != "pass":
                failures[case_id] = {"phase": test.get("fail_phase"),
                                     "reason": test.get("fail_reason"),
                                     "stage": test.get("stagedir")}
                continue
            failures.pop(case_id, None)  # a retry within the same report passed
            output = Path(test["outputdir"])
            provenance = output / PROVENANCE
            if provenance.exists():
                copy_atomic(provenance, data_dir / f"{case_id}.provenance.json")
            copy_atomic(output / ROWS, data_dir / f"{case_id}.jsonl")  # last: marks it done
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, type=Path,
                        help="the run's resolved configuration (results/<run_id>/config.yaml)")
    parser.add_argument("--group", required=True, help="figure id, e.g. fig3")
    parser.add_argument("--run-dir", required=True, type=Path, help="results/<run_id>")
    parser.add_argument("--marker", type=Path, help="file written when the group is complete "
                        "(default: <run-dir>/reframe/<group>/complete.json)")
    args = parser.parse_args(argv)
    try:
        config = pcases.load_config(args.config)
        if args.group not in pcases.measured_figures(config):
            raise pcases.ConfigError(f"group {args.group!r} is not measured by this configuration "
                                     f"(measured: {', '.join(pcases.measured_figures(config))})")
        expected = {case.id: case for case in pcases.cases(config, [args.group])}
    except pcases.ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    run_dir = args.run_dir.resolve()
    run_id = config["run_id"]
    group_dir = run_dir / "reframe" / args.group
    data_dir = run_dir / "data" / args.group
    marker = args.marker or group_dir / "complete.json"
    todo = [case for case_id, case in expected.items()
            if not (data_dir / f"{case_id}.jsonl").exists()]
    say(f"{args.group}: {len(expected)} checks, {len(expected) - len(todo)} passed earlier, "
        f"{len(todo)} to run")

    failures: dict[str, dict] = {}
    if todo:
        attempt = next_attempt(group_dir)
        attempt.mkdir(parents=True)
        report = attempt / "report.json"
        command = reframe_command(config, args.config.resolve(), todo, run_id, report)
        env = dict(os.environ, PCREPRO_CONFIG=str(args.config.resolve()),
                   PCREPRO_RFM_PREFIX=str(attempt))
        say(f"{args.group}: ReFrame run in {attempt}")
        say("$ " + " ".join(command))
        # ReFrame's own progress lines ([ RUN ], [ OK ] (3/8) ...) go straight to our stdout.
        result = subprocess.run(command, env=env, cwd=attempt)
        if not report.exists():
            print(f"error: ReFrame exited with status {result.returncode} without a report "
                  f"({report}); see {attempt / 'reframe.log'}", file=sys.stderr)
            return 1
        failures = harvest(report, data_dir, expected)

    missing = [case_id for case_id in expected if not (data_dir / f"{case_id}.jsonl").exists()]
    if missing:
        print(f"error: {len(missing)} of {len(expected)} checks of {args.group} did not pass "
              "(the passing ones are kept; re-run to retry only these):", file=sys.stderr)
        for case_id in missing:
            info = failures.get(case_id)
            if info is None:
                print(f"  {case_id}: not run by ReFrame (no environment with "
                      f"extras mpi_library={expected[case_id].library} on system "
                      f"{config['site']['system']}?)", file=sys.stderr)
            else:
                print(f"  {case_id}: failed in {info['phase']}: {info['reason']}\n"
                      f"    stage: {info['stage']}", file=sys.stderr)
        return 1
    summary = {
        "group": args.group, "run_id": run_id,
        "completed": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cases": {case_id: {"rows": str((data_dir / f"{case_id}.jsonl").relative_to(run_dir)),
                            "library": case.library, "algorithm": case.algorithm,
                            "op": case.op, "nprocs": case.nprocs}
                  for case_id, case in expected.items()},
    }
    write_atomic(marker, json.dumps(summary, indent=2) + "\n")
    say(f"{args.group}: complete ({len(expected)} checks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
