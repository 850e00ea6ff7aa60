# The front door: `make wheels` and `make test` set up their own virtual environment.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STACK ?=
ARGS ?=

.PHONY: wheels test test-fast test-releases lint drift bench fuzz index docs sglang-regions-table sglang-regions-docs clean distclean

$(VENV)/.ready: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.test-ready: $(VENV)/.ready
	$(PY) -m pip install -q -e '.[test]'
	touch $@

$(VENV)/.lint-ready: $(VENV)/.ready
	$(PY) -m pip install -q -e '.[lint]'
	touch $@

wheels: $(VENV)/.ready
	$(PY) build_wheels.py build $(if $(STACK),--stack $(STACK)) $(ARGS)

test: $(VENV)/.test-ready
	$(PY) -m pytest $(ARGS)

# The unit layer: no upstream wheel, no torch (under a minute).
test-fast: $(VENV)/.test-ready
	$(PY) -m pytest -m "not upstream and not torch" $(ARGS)

# ruff and mypy --strict, pinned in pyproject.toml's lint extra.
lint: $(VENV)/.lint-ready
	$(PY) -m ruff check src tests bench build_wheels.py
	$(PY) -m mypy

# Every carried release on every check (make test runs the pinned ones on all, the others on the cheap ones).
test-releases: $(VENV)/.test-ready
	NVFP4_OVERLAY_FULL=1 $(PY) -m pytest tests/test_trace_flashinfer.py tests/test_cuda_versions.py tests/test_cuda_audit.py $(ARGS)

drift: $(VENV)/.ready
	$(PY) build_wheels.py drift --against all $(ARGS)

# The applier against GNU patch and the archive round trip, FUZZ_EXAMPLES cases per property
# (`make test` runs 200); minutes, not in CI. Needs GNU patch on PATH.
FUZZ_EXAMPLES ?= 10000
fuzz: $(VENV)/.test-ready
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest tests/test_applier_properties.py \
		--hypothesis-show-statistics --hypothesis-seed=0 $(ARGS)

# docs/patches.md's audit table, rendered from patches/flashinfer-python/audit-cuda-versions.json
docs: $(VENV)/.ready
	$(PY) -c "from pathlib import Path; from nvfp4_overlay import cuda_audit as a; p = Path('docs/patches.md'); \
	p.write_text(a.render_into(p.read_text(), a.load_audit(Path('patches'))))"

# patches/sglang/audit-regions.json from the SGLang region probe (every stack's SGLang release, or
# VERSIONS="0.5.19 0.5.20"; torch, minutes per release), and docs/sglang-regions.md's table from it.
sglang-regions-table: $(VENV)/.test-ready
	$(PY) -m nvfp4_overlay.sglang_table table $(VERSIONS)

sglang-regions-docs: $(VENV)/.ready
	$(PY) -m nvfp4_overlay.sglang_table docs

index: $(VENV)/.ready
	$(PY) build_wheels.py index $(ARGS)

# The `wheel` package is needed only for the `wheel unpack` + `wheel pack` baseline row.
bench: $(VENV)/.test-ready
	$(PY) -c "import wheel" 2>/dev/null || $(PY) -m pip install -q wheel
	$(PY) bench/run.py $(ARGS)

clean:
	rm -rf dist build src/*.egg-info .pytest_cache

distclean: clean
	rm -rf $(VENV)
