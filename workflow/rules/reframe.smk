# One ReFrame run per figure group (workflow/scripts/run_group.py): passing checks' rows are
# kept in <run>/data/<group>/, and a re-run after a failure runs only the failed checks.


rule reframe_group:
    input:
        config=rules.run_config.output.config,
    output:
        f"{RUN_DIR}/reframe/{{group}}/complete.json",
    log:
        f"{RUN_DIR}/logs/reframe_{{group}}.log",
    params:
        script=str(REPO / "workflow" / "scripts" / "run_group.py"),
        run_dir=RUN_DIR,
    resources:
        # Benchmarks must not share the machine: the default profile allows one at a time.
        benchmark=1,
    shell:
        "{PYTHON} {params.script} --config {input.config} --group {wildcards.group} "
        "--run-dir {params.run_dir} --marker {output} 2>&1 | tee -a {log}"
