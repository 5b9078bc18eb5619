# Two entry points for a fresh machine: `make demo` (the main job) and `make test` (the suite).
# Both install what they need first: Debian's zookeeper and etcd-server, and the .venv.
PY ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: setup demo test test-fast test-long bench bench-kafka lint

setup: $(STAMP)

# the C sources too (the install compiles the C extensions in place), and the reference
# Kafka's pom and versions (setup resolves them)
$(STAMP): pyproject.toml replication/_cleaner_native.c replication/_records_native.c \
		coordinator/_etcd_native.c statemachines/_metadata_native.c \
		tests/kafka/pom.xml tests/kafka/versions.env
	bash .ci/setup
	touch $(STAMP)

demo: setup
	$(VENV)/bin/partctl demo

# two pytest-xdist workers, a test module each at a time (its module-scoped clusters stay in one
# worker; modules sharing a session-scoped one go together: WORKER_GROUPS), the longest first
# (tests/durations.py); each worker starts its own servers, on ports of its own (tests/conftest.py)
test: setup
	$(VENV)/bin/python -m pytest -q -n 2 --dist loadfile

# on demand: only the long tier that `make test` leaves out (tests marked `long`: the fault
# harness's runs on a real cluster beside CI's smoke, the Spark standalone cluster, the longer
# variants of the multi-process tests); tests/conftest.py
test-long: setup
	PARTCTL_LONG_TESTS=1 $(VENV)/bin/python -m pytest -q -n 2 --dist loadfile -m long

# the inner loop: every test that needs no server and starts no process (tests/conftest.py),
# on two workers, a test at a time each
test-fast: setup
	$(VENV)/bin/python -m pytest -q --fast -n 2

# ruff over everything; mypy over the product (pyproject.toml's [tool.mypy] says where strict)
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

bench: setup
	$(VENV)/bin/python benchmarks/coordinator.py

# partctl beside Apache Kafka 3.9.1 (ZooKeeper mode) and 4.x (KRaft), one table with the ratios
# and issue 32's targets (docs/performance.md); ARGS=--quick for a check, ARGS=--full for the
# issue's sizes, ARGS=--write-docs to keep the run in docs/
bench-kafka: setup
	$(VENV)/bin/python benchmarks/versus_kafka.py $(ARGS)

# the documentation site (mkdocs.yml, docs/) in site/; --strict: a broken link fails it
.PHONY: docs
docs: setup
	$(VENV)/bin/mkdocs build --strict
