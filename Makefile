# Entry points. Every target sets up what it needs first (idempotent: a second run reuses
# what is built). See README.md.
PYTHON ?= python3
VENV   := build/venv/bin
MPIS   ?=

.PHONY: setup test reproduce clean
setup:
	$(PYTHON) tools/bootstrap.py $(if $(MPIS),--mpis $(MPIS))

# The test suite (what .ci/run calls).
test: setup
	$(VENV)/pytest tests

# The full reproduction with the embedded default configuration (config/config.yaml).
reproduce: setup
	$(VENV)/snakemake --snakefile workflow/Snakefile --cores 2 $(SNAKEMAKE_ARGS)

clean:
	rm -rf build
