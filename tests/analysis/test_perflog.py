"""ReFrame perflog parsing. The two data lines follow the header/format that ReFrame 4.10
wrote for this project's PcbenchSweep check (site_configs/mpienv.py PERFLOG_FORMAT),
including the 'None' values ReFrame logs for a test that failed before measuring."""
from __future__ import annotations

import math

import pytest

from analysis import perflog
from analysis.common import AnalysisError

HEADER = ("job_completion_time|reframe version|display_name|system:partition|environ|"
          "num_tasks|result|NBL_mbps_value|NBL_mbps_unit|NBLx2_mbps_value|NBLx2_mbps_unit")
PASS = ("2026-11-22T04:20:58|reframe 4.10.4|PcbenchSweep %case=fig3_openmpi_AUTO_sum_p2|"
        "local:default|openmpi|2|pass|570.95|MB/s|1415.18|MB/s")
FAIL = ("2026-11-22T04:20:30|reframe 4.10.4|PcbenchSweep %case=fig3_openmpi_RNG_sum_p2|"
        "local:default|openmpi|2|fail|None|MB/s|None|MB/s")


def test_perflog_to_long_table(tmp_path):
    logs = tmp_path / "perflogs" / "local" / "default"
    logs.mkdir(parents=True)
    (logs / "PcbenchSweep.log").write_text("\n".join([HEADER, PASS, FAIL]) + "\n")
    (tmp_path / "reframe.log").write_text("[2026] debug: not a perflog\n")  # skipped
    frame = perflog.read([tmp_path])
    assert len(frame) == 4
    first = frame.iloc[0]
    assert (first["case"], first["perf_var"], first["value"], first["unit"]) == \
        ("fig3_openmpi_AUTO_sum_p2", "NBL_mbps", 570.95, "MB/s")
    assert first["system_partition"] == "local:default" and first["result"] == "pass"
    assert first["source"].endswith("PcbenchSweep.log:2")
    assert math.isnan(frame.iloc[2]["value"]) and frame.iloc[2]["result"] == "fail"


def test_perflog_errors_name_the_line(tmp_path):
    path = tmp_path / "x.log"
    path.write_text(HEADER + "\n" + PASS + "|extra\n")
    with pytest.raises(AnalysisError, match=r"x.log:2: 12 fields, the header has 11"):
        perflog.read([path])
    path.write_text(HEADER + "\n" + PASS.replace("570.95", "fast") + "\n")
    with pytest.raises(AnalysisError, match=r"x.log:2: NBL_mbps_value 'fast' is not a number"):
        perflog.read([path])
