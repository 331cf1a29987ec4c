# The two commands of README.md: `make demo` (main job) and `make test` (test suite).
# Both install what they need first.
PYTHON ?= python3

.PHONY: setup demo test lint
setup: .setup-done
.setup-done: pyproject.toml scripts/setup.sh
	bash scripts/setup.sh
	touch $@

demo: setup
	$(PYTHON) -m perfcast demo

test: setup
	$(PYTHON) -m pytest -q

lint: setup
	ruff check src tests benchmarks
	ruff format --check src tests benchmarks
	mypy src tests benchmarks
	lint-imports
