# The front door: `make wheels` and `make test` set up their own virtual environment.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STACK ?=
ARGS ?=

.PHONY: wheels jit-cache test test-fast test-releases test-torch oracle lint drift bench fuzz index docs routes audit-api check-generated cuda-audit sglang-launch-table sglang-regions-table sglang-layer-table sglang-regions-docs compile-list-table compile-list-docs clean distclean

$(VENV)/.ready: pyproject.toml setup.py
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

# Every check, on every core (pytest-xdist; pyproject.toml's addopts): the trace ladder and the CUDA
# grid of every carried release, upstream's half from tests/oracle/ (two releases a day afresh).
test: $(VENV)/.test-ready
	$(PY) -m pytest $(ARGS)

# The unit layer, tests/unit: no upstream wheel, no torch (tests/unit/conftest.py refuses a test that needs one).
test-fast: $(VENV)/.test-ready
	$(PY) -m pytest tests/unit $(ARGS)

# ruff and mypy --strict, pinned in pyproject.toml's lint extra.
lint: $(VENV)/.lint-ready
	$(PY) -m ruff check src tests bench proofs build_wheels.py setup.py
	$(PY) -m mypy

# Every carried release on every case, upstream probed afresh too (tests/oracle/ not taken): the weekly proof.
# SM121 (GB10) on every release too: the ladder's rung in test_trace_flashinfer.py, SGLang's regions below.
test-releases: $(VENV)/.test-ready
	NVFP4_OVERLAY_FULL=1 NVFP4_OVERLAY_FRESH=1 $(PY) -m pytest tests/releases/test_trace_flashinfer.py \
		tests/releases/test_cuda_versions.py tests/releases/test_cuda_audit.py tests/releases/test_oracle_releases.py $(ARGS)
	NVFP4_OVERLAY_FULL=1 $(PY) -m pytest tests/releases/test_sglang_regions.py -k sm121 $(ARGS)
	NVFP4_OVERLAY_FULL=1 $(PY) -m pytest $(LAYER_TESTS) tests/releases/test_sglang_layer_tp.py $(ARGS)
	NVFP4_OVERLAY_FULL=1 $(PY) -m pytest tests/releases/test_sglang_launch.py $(ARGS)

# Upstream's half of the oracle into tests/oracle/ (after a change to the probes, or for a new release):
# `make oracle`, or `make oracle ARGS="0.7.4"`.
oracle: $(VENV)/.test-ready
	$(PY) tests/oracle/regenerate.py $(ARGS)

# The trace ladder and the CUDA grid under another torch, in a venv of its own (.venv-torch-X), on the
# releases of the stacks whose SGLang pins it (every release for a torch no stack pins):
# `make test-torch TORCH=2.9.1`. The weekly workflow runs it for every stack's torch and the newest.
TORCH ?=
TORCH_VENV := $(VENV)-torch-$(TORCH)
test-torch:
	@test -n "$(TORCH)" || { echo "make test-torch: name the torch, e.g. make test-torch TORCH=2.9.1" >&2; exit 2; }
	test -x $(TORCH_VENV)/bin/python || $(PYTHON) -m venv $(TORCH_VENV)
	$(TORCH_VENV)/bin/python -m pip install -q -e '.[test-base]' torch==$(TORCH)
	NVFP4_OVERLAY_FULL=1 NVFP4_OVERLAY_RELEASES="$$($(TORCH_VENV)/bin/python tests/torch_pins.py $(TORCH))" \
		$(TORCH_VENV)/bin/python -m pytest tests/releases/test_trace_flashinfer.py tests/releases/test_cuda_versions.py $(ARGS)

# Every series on its own wheels (a failure) and on every newer release: where that release carries
# its own series, a series that does not carry there is news, not a failure (as the drift workflow);
# where a stack ships that release unpatched by design (its region audit leaves nothing raw), it is not
# needed there. Exit 0 on the committed tree (tests/carrying/test_committed_series.py holds it).
drift: $(VENV)/.ready
	$(PY) build_wheels.py drift --against pinned all $(ARGS)

# The applier against GNU patch and the archive round trip, FUZZ_EXAMPLES cases per property
# (`make test` runs 200); minutes, not in CI. Needs GNU patch on PATH.
FUZZ_EXAMPLES ?= 10000
fuzz: $(VENV)/.test-ready
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest tests/property/test_applier_properties.py \
		--hypothesis-show-statistics --hypothesis-seed=0 $(ARGS)

# Every generator of committed files is one command, `nvfp4-overlay generate NAME [--check]`
# (`nvfp4-overlay generate --list` says what each writes and reads, and which need torch); the targets
# below name them.

# docs/patches.md's audit table and the overlay's cuda_sites.py, rendered from
# patches/flashinfer-python/audit-cuda-versions.json
docs: $(VENV)/.ready
	$(PY) -m nvfp4_overlay generate cuda-docs $(ARGS)

# Patch 0002 of every flashinfer-python release (or RELEASES="0.7.4 0.7.2"), written from the releases' own
# text by the tool (`nvfp4-overlay generate routes`): run it after a change to the overlay's entries.py.
routes: $(VENV)/.ready
	$(PY) -m nvfp4_overlay generate routes $(RELEASES) $(ARGS)

# patches/flashinfer-python/audit-serving-api.json from scans of every carried release, and
# docs/serving-api.md's table from it.
audit-api: $(VENV)/.ready
	$(PY) -m nvfp4_overlay generate audit-api $(ARGS)

# The generated committed files are what the generators write: every generator that has --check
# (CI; tests/unit/test_generate.py holds this list to `generate --list`; tests/releases/test_routes.py too).
check-generated: $(VENV)/.ready
	$(PY) -m nvfp4_overlay generate routes --check $(ARGS)
	$(PY) -m nvfp4_overlay generate audit-api --check $(ARGS)
	$(PY) -m nvfp4_overlay generate cuda-audit --check $(ARGS)
	$(PY) -m nvfp4_overlay generate cuda-docs --check
	$(PY) -m nvfp4_overlay generate launch-table --check $(ARGS)
	$(PY) -m nvfp4_overlay generate compile-list-docs --check
	$(PY) -m nvfp4_overlay generate sglang-regions-docs --check
	$(PY) -m nvfp4_overlay generate doctor-schema --check

# patches/sglang/audit-launch.json from every SGLang release's own argument handling (or VERSIONS="0.5.20";
# torch, about a minute a release), then docs/patches.md's and the README's launch-line tables from it.
sglang-launch-table: $(VENV)/.test-ready
	$(PY) -m nvfp4_overlay generate launch-table --resolve $(VERSIONS) $(ARGS)

# patches/flashinfer-python/audit-cuda-versions.json made anew from every carried release's scan (each
# call with the releases it is in, every verdict kept); then make docs. --check: CI's comparison.
cuda-audit: $(VENV)/.ready
	$(PY) -m nvfp4_overlay generate cuda-audit $(ARGS)

# patches/sglang/audit-regions.json from the SGLang region probe (every stack's SGLang release, or
# VERSIONS="0.5.19 0.5.20"; torch, minutes per release), and docs/sglang-regions.md's table from it.
sglang-regions-table: $(VENV)/.test-ready
	$(PY) -m nvfp4_overlay generate sglang-regions $(VERSIONS) $(ARGS)

# patches/sglang/audit-layer.json from the whole-layer probe's runs (probes/sglang/layer/: every release with a
# fullgraph prefill path; the NVFP4 layers, the FP8 block-scale layers, the seed's whole model; one process:
# each run writes its entry), then make sglang-regions-docs.
LAYER_TESTS := tests/releases/test_sglang_layer.py tests/releases/test_sglang_layer_fp8.py tests/releases/test_sglang_seed.py
sglang-layer-table: $(VENV)/.test-ready
	NVFP4_OVERLAY_FULL=1 NVFP4_OVERLAY_WRITE_LAYER=1 $(PY) -m pytest -n 0 $(LAYER_TESTS) $(ARGS)

# patches/flashinfer-python/audit-compile-list.json: FlashInfer's own compile list on every carried release
# (or RELEASES="0.7.4 0.6.8.post1"), upstream and patched, from the compile-list probe (torch; minutes a
# release, kept in the result cache); then make compile-list-docs renders docs/compile-list.md from it.
compile-list-table: $(VENV)/.test-ready
	$(PY) -m nvfp4_overlay generate compile-list $(RELEASES) $(ARGS)

compile-list-docs: $(VENV)/.ready
	$(PY) -m nvfp4_overlay generate compile-list-docs

sglang-regions-docs: $(VENV)/.ready
	$(PY) -m nvfp4_overlay generate sglang-regions-docs

index: $(VENV)/.ready
	$(PY) build_wheels.py index $(ARGS)

# The `wheel` package is needed only for the `wheel unpack` + `wheel pack` baseline row.
bench: $(VENV)/.test-ready
	$(PY) -m pip show -q wheel >/dev/null 2>&1 || $(PY) -m pip install -q wheel
	$(PY) bench/run.py $(ARGS)

clean:
	rm -rf dist build src/*.egg-info .pytest_cache

distclean: clean
	rm -rf $(VENV)

# The default stack's (or STACK's) FlashInfer JIT modules for GPU=sm90|sm100|sm120|sm121, prebuilt with the
# real nvcc into dist/flashinfer_jit_cache-*.whl (needs the patched wheels: make wheels).
GPU ?=
jit-cache: $(VENV)/.test-ready
	@test -n "$(GPU)" || { echo "make jit-cache: name the GPU family, e.g. make jit-cache GPU=sm120" >&2; exit 2; }
	$(PY) build_wheels.py jit-cache $(if $(STACK),--stack $(STACK)) --gpu $(GPU) $(ARGS)
