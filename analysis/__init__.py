"""Results of the reproduction: parse -> tidy table -> figures, cost models, findings report.

Modules (command line: `python -m analysis <command> --help`):
  tidy       pcbench JSON Lines -> validated tidy table; labels become columns; `series`
             in the paper's notation (NBL(RNG), NBLx4(RNG), 32MB(RNG), BL(AUTO), ... NOOP)
  perflog    ReFrame perflogs -> one row per performance variable
  selection  which rows feed which entry of config/figures.yaml (latest run per figure)
  figures    paper-style figures (log2 size axis, MB/s, panels, paper legends), PNG + PDF
  table1     the paper's Table 1 cost models, alpha/beta/gamma fitted here, drawn over data
  findings   every micro-benchmark finding as a stated rule -> holds / does not hold /
             not measured here
  report     Markdown + HTML report; the paper's numbers come from paper_reference.yaml
"""
