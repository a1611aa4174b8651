"""The whole analysis on the real run through the command line: tidy -> figures -> table1
-> report; the report names the machine and run and gives every finding a verdict."""
from __future__ import annotations

import re
import subprocess
import sys

from analysis.common import PAPER_REFERENCE, REPO_ROOT, load_catalogue, load_yaml


def _run(*args):
    return subprocess.run([sys.executable, "-m", "analysis", *map(str, args)],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)


def test_all_on_the_real_run(real_run, real_frame, tmp_path):
    done = _run("all", real_run["dir"], "--out-dir", tmp_path)
    assert done.returncode == 0, done.stderr
    for fig in load_catalogue():
        for ext in ("png", "pdf"):
            assert (tmp_path / "figures" / f"{fig}.{ext}").stat().st_size > 1000
    assert (tmp_path / "table1_params.json").exists()
    tidy_lines = (tmp_path / "tidy.csv").read_text().splitlines()
    assert len(tidy_lines) == 1 + len(real_frame)

    report = (tmp_path / "report.md").read_text()
    assert real_run["run_id"] in report
    assert f"({len(real_frame)} measurements)" in report
    for host in set(real_frame["host"]):
        assert host in report
    assert real_frame["mpi_library"].iloc[0].split(",")[0] in report
    # every finding of the paper appears with a verdict, next to the paper's statement
    reference = load_yaml(PAPER_REFERENCE, "paper reference")["findings"]
    summary = {}
    for line in report.splitlines():
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        if cells and cells[0] in reference:
            summary[cells[0]] = cells
    assert set(summary) == set(reference)
    for fid, cells in summary.items():
        assert cells[1] == reference[fid]["paper"]
        assert cells[3] in ("holds", "does not hold", "not measured here"), cells
    assert summary["fig5.no_gain"][3] == "not measured here"
    # embedded figures resolve relative to the report
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", report)
    assert len(images) == len(load_catalogue())
    for image in images:
        assert (tmp_path / image).is_file(), image
    html = (tmp_path / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and html.count("<img src=") == len(images)
    assert real_run["run_id"] in html


def test_commands_one_by_one_and_errors(real_run, tmp_path, capsys):
    # in-process (the subprocess path is covered above and in test_tidy)
    from analysis.__main__ import main

    def run(*args):
        code = main(list(map(str, args)))
        out = capsys.readouterr()
        return code, out.out, out.err

    table = tmp_path / "t.csv"
    assert run("tidy", real_run["dir"], "-o", table)[0] == 0
    code, out, _ = run("figures", "--table", table, "--out-dir", tmp_path / "f",
                       "--figure", "fig3")
    assert code == 0 and "fig3: run " + real_run["run_id"] in out
    assert sorted(p.name for p in (tmp_path / "f").iterdir()) == ["fig3.pdf", "fig3.png"]
    code, _, err = run("figures", "--table", table, "--out-dir", tmp_path / "f",
                       "--figure", "fig99")
    assert code == 2 and "--figure fig99: not a drawable" in err
    code, _, err = run("report", "--table", tmp_path / "missing.csv", "--figures-dir",
                       tmp_path, "-o", tmp_path / "r.md")
    assert code == 2 and "missing.csv does not exist" in err
    code, _, err = run("report", "--table", table, "--figures-dir", tmp_path / "f", "-o",
                       tmp_path / "r.md", "--params", tmp_path / "nope.json")
    assert code == 2 and "nope.json do not exist" in err
    code, out, _ = run("table1", "--table", table, "--out-dir", tmp_path / "f")
    assert code == 0 and "table1 openmpi: alpha=" in out
    assert (tmp_path / "f" / "table1_params.json").exists()
