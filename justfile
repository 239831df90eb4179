# Recipes for model-catalog. `just --list` shows them. The venv lives in .venv (see README).
set shell := ["bash", "-euo", "pipefail", "-c"]

py := ".venv/bin/python"

# The controller image's base; `just image` pins it by digest (see Containerfile).
python_image := "docker.io/library/python:3.11-slim"

# Create .venv and install the project with its development tools.
setup:
    python3 -m venv .venv
    .venv/bin/pip install -q --disable-pip-version-check -e '.[dev]'

# Layering (import-linter), style (ruff) and types (mypy --strict on every package and the benchmarks).
lint:
    .venv/bin/lint-imports
    .venv/bin/ruff check .
    .venv/bin/ruff format --check .
    .venv/bin/mypy catalog_core contracts
    .venv/bin/mypy adapters app model_catalog bench

# Three processes at once, each with the peers it needs: the tests on LiteLLM (printed live), those on
# the kube-apiserver alone and those that need no peer (printed after), so the peers' starts and waits
# overlap the others' work. Exit 5 (ARGS selected no test) counts as success in a part, not in all three.
# Lint, then the whole test suite (starts the kube-apiserver and LiteLLM peers when none are configured).
test *ARGS: lint
    none_log=$(mktemp); kube_log=$(mktemp); \
    {{py}} -m pytest --peers=none -p no:cacheprovider {{ARGS}} > "$none_log" 2>&1 & none=$!; \
    {{py}} -m pytest --peers=kube -p no:cacheprovider {{ARGS}} > "$kube_log" 2>&1 & kube=$!; \
    a=0; {{py}} -m pytest --peers=litellm {{ARGS}} || a=$?; \
    b=0; wait $kube || b=$?; c=0; wait $none || c=$?; \
    echo; echo "=== the tests on the kube-apiserver alone (run at the same time) ==="; cat "$kube_log"; \
    echo; echo "=== the tests that need no peer (run at the same time) ==="; cat "$none_log"; \
    rm -f "$none_log" "$kube_log"; \
    if [ $a -eq 5 ] && [ $b -eq 5 ] && [ $c -eq 5 ]; then exit 5; fi; \
    worst=0; for s in $a $b $c; do if [ $s -ne 5 ] && [ $s -gt $worst ]; then worst=$s; fi; done; exit $worst

# The property tests, randomized, with five times their examples (slower; not part of `test` or CI).
explore *ARGS:
    HYPOTHESIS_PROFILE=explore {{py}} -m pytest tests/core tests/eventlog -q {{ARGS}}

# Benchmarks (not part of `test`): writes bench/results/.
bench *ARGS:
    {{py}} -m bench.run {{ARGS}}

# What embedding costs a synchronous host: import time and RSS (not part of `test`); writes bench/results/embed-cost.md.
embed-cost *ARGS:
    {{py}} -m bench.embed_cost {{ARGS}}

# app/generated.py writes the sources schema, docs/rbac.md's table and the bootstrap placeholder;
# tests/test_generated.py fails, naming this command, when one is stale.
# Rewrite every file generated from the declarations.
generate:
    {{py}} -m app.generated

# Render the bundled example cluster against a saved LiteLLM /model/info.
render-example:
    .venv/bin/model-catalog render -f examples/cluster.yaml --litellm-info examples/litellm-info.json --healthy phi-4-mini

# Fault injection, full profile (30 s holds, 40 kill rounds, real LiteLLM down 60 s); writes the results and README table.
faults *ARGS:
    status=0; MODEL_CATALOG_FAULTS=full MODEL_CATALOG_FAULT_RESULTS=tests/faults/results/faults.json {{py}} -m pytest tests/faults --timeout=2400 {{ARGS}} || status=$?; {{py}} -m tests.faults.report; exit $status

# Regenerate requirements.lock from PyPI alone (runtime deps + build backend, each with its sha256; ARGS e.g. --upgrade).
lock *ARGS:
    env -u PIP_FIND_LINKS -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL PIP_CONFIG_FILE=/dev/null \
        CUSTOM_COMPILE_COMMAND="just lock" .venv/bin/pip-compile --quiet --generate-hashes --allow-unsafe \
        --build-deps-for=wheel --strip-extras --no-emit-index-url --no-emit-find-links \
        --index-url=https://pypi.org/simple --output-file=requirements.lock {{ARGS}} pyproject.toml

# The base's digest is PYTHON_DIGEST, else the registry's at build time (skopeo or docker buildx).
# The image, on python_image pinned by digest.
image tag="ghcr.io/magicstick/ai-model-catalog:0.1.0" engine=env("CONTAINER_ENGINE", "podman"):
    digest="${PYTHON_DIGEST:-}"; \
    if [ -z "$digest" ] && command -v skopeo >/dev/null; then \
        digest="$(skopeo inspect --format '{{{{.Digest}}' docker://{{python_image}})"; \
    elif [ -z "$digest" ]; then \
        digest="$(docker buildx imagetools inspect {{python_image}} --format '{{{{json .Manifest}}' | {{py}} -c 'import json, sys; print(json.load(sys.stdin)["digest"])')"; \
    fi; \
    [[ "$digest" =~ ^sha256:[0-9a-f]{64}$ ]] || { echo "no digest for {{python_image}}: '$digest'" >&2; exit 1; }; \
    {{engine}} build --build-arg PYTHON_IMAGE={{python_image}}@$digest -t {{tag}} -f Containerfile .
