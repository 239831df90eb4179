# Recipes for model-catalog. `just --list` shows them. The venv lives in .venv (see README).
set shell := ["bash", "-euo", "pipefail", "-c"]

py := ".venv/bin/python"

# Create .venv and install the project with its development tools.
setup:
    python3 -m venv .venv
    .venv/bin/pip install -q --disable-pip-version-check -e '.[dev]'

# Layering (import-linter), style (ruff) and types (mypy --strict on the core and contracts).
lint:
    .venv/bin/lint-imports
    .venv/bin/ruff check .
    .venv/bin/ruff format --check .
    .venv/bin/mypy catalog_core contracts
    .venv/bin/mypy adapters app

# Lint, then the whole test suite (starts the kube-apiserver and LiteLLM peers when none are configured).
test *ARGS: lint
    {{py}} -m pytest {{ARGS}}

# Benchmarks (not part of `test`): writes bench/results/.
bench *ARGS:
    {{py}} -m bench.run {{ARGS}}

# Render the bundled example cluster against a saved LiteLLM /model/info.
render-example:
    .venv/bin/model-catalog render -f examples/cluster.yaml --litellm-info examples/litellm-info.json --healthy phi-4-mini

# Fault injection, full profile (30 s holds, 40 kill rounds, real LiteLLM down 60 s); writes the results and README table.
faults *ARGS:
    status=0; MODEL_CATALOG_FAULTS=full MODEL_CATALOG_FAULT_RESULTS=tests/faults/results/faults.json {{py}} -m pytest tests/faults --timeout=2400 {{ARGS}} || status=$?; {{py}} -m tests.faults.report; exit $status
