"""Paper-style figures from the real run: files written, legends in the paper's notation."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from analysis import figures
from analysis.common import AnalysisError, load_catalogue

CATALOGUE = load_catalogue()


def _check_files(files):
    png, pdf = sorted(files, key=lambda p: p.suffix != ".png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 1000


def test_fig3_from_the_real_run(real_run, real_frame, tmp_path):
    result = figures.draw_figure(real_frame, CATALOGUE, "fig3", tmp_path)
    assert result["measured"] and result["run_id"] == real_run["run_id"]
    assert {"NBL(AUTO)", "NBLx2(AUTO)", "NBLx4(AUTO)"} <= set(result["series"])
    _check_files(result["files"])


def test_median_metric_figure(real_frame, tmp_path):
    result = figures.draw_figure(real_frame, CATALOGUE, "fig1", tmp_path, metric="median")
    assert result["measured"]
    _check_files(result["files"])


def test_figure_without_data_says_not_measured(real_frame, tmp_path, capsys):
    result = figures.draw_figure(real_frame, CATALOGUE, "fig5", tmp_path)
    assert not result["measured"]
    assert "no rows in the table match" in capsys.readouterr().err
    _check_files(result["files"])


def test_unknown_and_derived_figures(real_frame, tmp_path):
    with pytest.raises(AnalysisError, match="not in the catalogue"):
        figures.draw_figure(real_frame, CATALOGUE, "fig99", tmp_path)
    with pytest.raises(AnalysisError, match="table1"):
        figures.draw_figure(real_frame, CATALOGUE, "table1", tmp_path)


def test_size_axis_labels():
    fig, ax = plt.subplots()
    figures.format_size_axis(ax, [1 << 16, 1 << 20])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["64KB", "128KB", "256KB",
                                                            "512KB", "1MB"]
    figures.format_size_axis(ax, [8, 1 << 30])           # 28 powers of two: thinned
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels[0] == "8B" and len(labels) <= 10 and "1GB" in labels
    plt.close(fig)
