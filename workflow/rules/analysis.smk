FINAL_OUTPUTS = expand(f"{RUN_DIR}/reframe/{{group}}/complete.json", group=GROUPS)
