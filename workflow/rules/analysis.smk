# Rows -> tidy tables -> figures, table1 -> findings report (the analysis package's CLI:
# python -m analysis tidy|figures|table1|report). Each figure depends only on its own group,
# so a failed group costs only its own figure (and the report, which needs everything).

CATALOGUE = pcases.load_catalogue()


def sources(product):
    """Figure groups whose rows a figure or table is drawn from."""
    entry = CATALOGUE[product]
    return [product] if "experiment" in entry else list(entry.get("derived_from", []))


rule tidy_product:
    input:
        lambda wc: expand(f"{RUN_DIR}/reframe/{{group}}/complete.json", group=sources(wc.product)),
    output:
        f"{RUN_DIR}/tables/{{product}}.csv",
    log:
        f"{RUN_DIR}/logs/tidy_{{product}}.log",
    params:
        data=lambda wc: [f"{RUN_DIR}/data/{group}" for group in sources(wc.product)],
    shell:
        "{PYTHON} -m analysis tidy {params.data} -o {output} > {log} 2>&1 || (cat {log}; exit 1)"


rule tidy_all:
    input:
        expand(f"{RUN_DIR}/reframe/{{group}}/complete.json", group=GROUPS),
    output:
        f"{RUN_DIR}/tables/measurements.csv",
    log:
        f"{RUN_DIR}/logs/tidy_all.log",
    params:
        data=[f"{RUN_DIR}/data/{group}" for group in GROUPS],
    shell:
        "{PYTHON} -m analysis tidy {params.data} -o {output} > {log} 2>&1 || (cat {log}; exit 1)"


rule figure:
    input:
        f"{RUN_DIR}/tables/{{figure}}.csv",
    output:
        png=f"{RUN_DIR}/figures/{{figure}}.png",
        pdf=f"{RUN_DIR}/figures/{{figure}}.pdf",
    log:
        f"{RUN_DIR}/logs/figure_{{figure}}.log",
    shell:
        "{PYTHON} -m analysis figures --table {input} --out-dir {RUN_DIR}/figures "
        "--figure {wildcards.figure} --run-id {RUN_ID} > {log} 2>&1 || (cat {log}; exit 1)"


rule table1:
    input:
        f"{RUN_DIR}/tables/table1.csv",
    output:
        png=f"{RUN_DIR}/figures/table1.png",
        pdf=f"{RUN_DIR}/figures/table1.pdf",
        params=f"{RUN_DIR}/tables/table1_params.json",
    log:
        f"{RUN_DIR}/logs/table1.log",
    shell:
        "{PYTHON} -m analysis table1 --table {input} --out-dir {RUN_DIR}/figures "
        "--params {output.params} --run-id {RUN_ID} > {log} 2>&1 || (cat {log}; exit 1)"


rule report:
    input:
        table=rules.tidy_all.output[0],
        figures=expand(f"{RUN_DIR}/figures/{{figure}}.png", figure=FIGURES),
        table1=rules.table1.output.params if "table1" in TABLES else [],
    output:
        md=f"{RUN_DIR}/report.md",
        html=f"{RUN_DIR}/report.html",
    log:
        f"{RUN_DIR}/logs/report.log",
    params:
        table1=lambda wc, input: f"--params {input.table1}" if input.table1 else "",
    shell:
        "{PYTHON} -m analysis report --table {input.table} --figures-dir {RUN_DIR}/figures "
        "{params.table1} --run-id {RUN_ID} -o {output.md} --html {output.html} "
        "> {log} 2>&1 || (cat {log}; exit 1)"
        " && cat {log}"


FINAL_OUTPUTS = [
    rules.report.output.md,
    *expand(f"{RUN_DIR}/figures/{{figure}}.pdf", figure=FIGURES),
    *([rules.table1.output.pdf] if "table1" in TABLES else []),
]
