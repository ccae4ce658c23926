# rewardbox: `make` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TRAINERS_VENV := .venv-trainers
VERSION := $(shell sed -n 's/^__version__ = "\(.*\)"/\1/p' rewardbox/__init__.py)
# The lean sandbox image's tag: the version and the digest of the harness (rewardbox.images).
IMAGE = $(shell $(BIN)/python -c 'from rewardbox.images import image_tag; print(image_tag())')
# The toolchain images `make sandbox-image` builds beside the lean one (LANGUAGES="cpp java"); `make language-images`
# builds every language that has an image (rewardbox.images.languages: cpp, java, javascript, go, rust; cpp20 is
# cpp's), read when the recipe runs, once the package is installed.
LANGUAGES ?=
ALL_LANGUAGES = $(shell $(BIN)/python -c 'from rewardbox.images.languages import LANGUAGE_IMAGES; print(*LANGUAGE_IMAGES)')

.DEFAULT_GOAL := help
.PHONY: help install lint typecheck engine gvisor sandbox-image scientific-image language-images service-image image-if-missing trainers-env demo test test-unit test-docker test-ray test-trainers soak bench docs clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-15s %s\n", $$1, $$2}'

$(BIN)/rewardbox: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test,torch,ray,docs]'
	@touch $@

# math-verify's sdist (its test suite's cases: bench/math_verify_cases.py), at the version constraints.txt pins.
MATH_VERIFY := $(shell sed -n 's/^math-verify==\([^ ;]*\).*/\1/p' constraints.txt)
MATH_VERIFY_SDIST := bench/.cache/math_verify-$(MATH_VERIFY).tar.gz

$(MATH_VERIFY_SDIST): | $(BIN)/rewardbox
	$(BIN)/pip download --quiet --no-deps --no-binary :all: --dest bench/.cache 'math-verify==$(MATH_VERIFY)'
	@test -f $@ || { echo "pip gave no $@" >&2; exit 1; }
	@touch $@

install: $(BIN)/rewardbox $(MATH_VERIFY_SDIST) ## install rewardbox and its test tools into .venv; math-verify's sdist into bench/.cache

engine: ## make sure a Docker engine runs (installs and starts one if root on Debian)
	@bash scripts/ensure-engine.sh

gvisor: sandbox-image ## install and register the gVisor runtime runsc (Debian's runsc; dockerd reloaded, never restarted)
	@IMAGE=$(IMAGE) bash scripts/ensure-gvisor.sh

sandbox-image: engine $(BIN)/rewardbox ## build the sandbox image rewardbox/python:<version>-<harness digest> (rewardbox image build; seconds when nothing changed), and LANGUAGES="cpp java" toolchain images
	@$(BIN)/rewardbox image build >/dev/null
	@for language in $(LANGUAGES); do $(BIN)/rewardbox image build --language $$language >/dev/null || exit 1; done

language-images: engine $(BIN)/rewardbox ## build the toolchain images rewardbox/<language>:<version>-<digest> (cpp, java, javascript, go, rust) from Debian's packages, fetched on the host
	@$(MAKE) --no-print-directory sandbox-image LANGUAGES="$(ALL_LANGUAGES)"

scientific-image: engine $(BIN)/rewardbox ## build the scientific sandbox image (rewardbox image build --variant scientific: numpy, scipy, pandas, sympy, ...)
	@$(BIN)/rewardbox image build --variant scientific >/dev/null

service-image: install sandbox-image ## build the service image rewardbox/service:<version> (rewardbox serve in a container)
	@PYTHON=$(BIN)/python bash images/service/build.sh rewardbox/service:$(VERSION)

trainers-env: install ## the trainers tier's virtualenv .venv-trainers: the pinned trainer releases (tests/trainers/environment.py)
	$(BIN)/python tests/trainers/environment.py $(TRAINERS_VENV)

image-if-missing: engine $(BIN)/rewardbox
	@$(BIN)/rewardbox image build >/dev/null

demo: install image-if-missing ## score examples/rollouts.jsonl and show the summary
	$(BIN)/rewardbox score examples/rollouts.jsonl --output examples/results.jsonl
	@echo "results: examples/results.jsonl"

PYTEST = $(BIN)/python -m pytest -p no:cacheprovider
TIER_RAY = scripts/loopback-only $(PYTEST) tests/ray
TIER_TRAINERS = $(TRAINERS_VENV)/bin/python -m pytest -p no:cacheprovider tests/trainers
# test_sessions sets each case's runtime itself (runc and gVisor): the docker tier has run them all.
TIER_GVISOR = REWARDBOX_TEST_RUNTIME=runsc $(PYTEST) --durations=10 -m core tests/docker/adversarial tests/docker/test_pool_isolation.py \
	tests/docker/test_cpu_pinning.py \
	--ignore=tests/docker/adversarial/test_sessions.py
# The sessions' attacks are on the session's own container, the same in every mode; only the
# final grading run takes the mode. One case (planted files, runc) grades through the cold mode;
# the other 25 repeated the docker tier's (2 m 50 s of the cold pass's 5 m 20 s).
TIER_COLD = REWARDBOX_TEST_MODE=cold $(PYTEST) -m core tests/docker/adversarial \
	-k 'not test_sessions.py or (test_planted_files_do_not_change_the_score and runc)'

test: install sandbox-image scientific-image language-images gvisor trainers-env ## run the tiers (unit, docker in the pooled mode, Ray on a local loopback cluster, the trainers' own code), then the adversarial core (and the pool's isolation tests) under gVisor, and the core in the cold mode
	$(MAKE) --no-print-directory lint typecheck docs
	$(PYTEST) --durations=20 --ignore=tests/ray --ignore=tests/trainers rewardbox sandbox rewards tests
	$(TIER_RAY)
	$(TIER_TRAINERS)
	$(TIER_GVISOR)
	$(TIER_COLD)

docs: install ## build the documentation site (docs/, mkdocs.yml) into build/site; strict: a broken link or anchor fails
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir build/site

typecheck: install ## mypy, strict with the pydantic plugin (pyproject.toml), over the rewardbox packages as installed (scripts/typecheck); zero findings
	PYTHON=$(CURDIR)/$(BIN)/python scripts/typecheck

lint: install ## ruff (pycodestyle, pyflakes, isort, bugbear, pyupgrade, simplify: pyproject.toml) over the code, tests, bench and examples; zero findings
	$(BIN)/ruff check rewardbox sandbox rewards images tests bench examples scripts conftest.py

test-unit: install ## run the unit tier only (no Docker needed)
	$(PYTEST) rewardbox sandbox rewards tests/unit

test-docker: install sandbox-image scientific-image language-images ## run the docker tier only
	$(PYTEST) tests/docker

test-ray: install sandbox-image ## run the Ray tier only: a local cluster of node processes, in a network namespace holding only loopback (root)
	$(TIER_RAY)

test-trainers: trainers-env sandbox-image ## run the trainers tier only: TRL, OpenRLHF, verl and twinkle releases calling the adapters
	$(TIER_TRAINERS)

soak: install sandbox-image ## 2,000 runs, honest and hostile mixed at full concurrency: leaks, memory; bench/results/soak.json
	@mkdir -p bench/results
	$(BIN)/python bench/soak.py --runs 2000 --json bench/results/soak.json

bench: install sandbox-image language-images ## scoring modes side by side on HumanEval, then the compiled languages (bench/README.md); BENCH_ARGS="--samples 24" for a short run
	$(BIN)/python bench/bench.py --workers 2 --json bench/results/bench.json $(BENCH_ARGS)
	$(BIN)/python bench/hostile_text.py --json bench/results/hostile_text.json
	$(BIN)/python bench/sessions.py --json bench/results/sessions.json
	$(BIN)/python bench/languages.py --workers 2 --json bench/results/languages.json

clean: ## remove the virtual environment and build leftovers
	rm -rf $(VENV) $(TRAINERS_VENV) build dist *.egg-info examples/results.jsonl
