# Locus: `make` builds every library into build/lib, `make test` runs the whole test suite,
# `make bench` runs the lab's default comparison into results/.
BUILD   ?= build
VENV    ?= .venv
PYTHON  ?= python3
GENERATOR := $(shell command -v ninja >/dev/null 2>&1 && echo Ninja || echo "Unix Makefiles")

.PHONY: all build configure venv test test-c test-lab bench clean

all: build

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -G "$(GENERATOR)" -DCMAKE_BUILD_TYPE=Release

configure: $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j 2

$(VENV)/.ready: lab/requirements.txt lab/pyproject.toml
	$(PYTHON) -m venv --clear $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r lab/requirements.txt
	$(VENV)/bin/pip install -q --disable-pip-version-check --no-deps -e lab
	touch $@

venv: $(VENV)/.ready

test: build venv
	cd $(BUILD) && ctest --output-on-failure -j 2
	$(VENV)/bin/python -m pytest lab/tests -q

bench: build venv
	$(VENV)/bin/locus compare --output results

clean:
	rm -rf $(BUILD) results
