# The two commands of the quickstart, and a few for development. Everything goes through hack/.
.PHONY: test demo demo-clean check venv bench image docs clean

test:            ## install everything, start what the tests need, run ruff, mypy and pytest
	hack/test

demo:            ## run the main job on this machine (embedded PostgreSQL unless FERRYMAN_DATABASE_URL)
	hack/demo

demo-clean:      ## forget the demo's database (the next make demo starts from scratch)
	rm -rf .state/demo-postgres

check:           ## lint and type-check only
	hack/check

venv:            ## create .venv with the project and its development tools
	hack/venv

image:           ## build the container image localhost/ferryman:<version> (cached by content)
	hack/image

bench:           ## run the benchmarks in hack/bench/
	.venv/bin/python -P hack/bench/queue.py

docs:            ## serve the documentation site on http://127.0.0.1:8000 (DOCS_ADDR=host:port moves it)
	hack/venv
	NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs serve --dev-addr "$${DOCS_ADDR:-127.0.0.1:8000}"

clean:
	rm -rf .venv .pytest_cache .mypy_cache .ruff_cache
