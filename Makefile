# The front door: `make wheels` and `make test` set up their own virtual environment.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STACK ?=
ARGS ?=

.PHONY: wheels test drift bench fuzz index clean distclean

$(VENV)/.ready: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.test-ready: $(VENV)/.ready
	$(PY) -m pip install -q -e '.[test]'
	touch $@

wheels: $(VENV)/.ready
	$(PY) build_wheels.py build $(if $(STACK),--stack $(STACK)) $(ARGS)

test: $(VENV)/.test-ready
	$(PY) -m pytest $(ARGS)

drift: $(VENV)/.ready
	$(PY) build_wheels.py drift --against all $(ARGS)

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
