# Locus: `make` builds every library into build/lib, `make test` runs the whole test suite,
# `make bench` compares glibc, Locus, Locus secure and the peers (installed first when it can)
# on the lab's default suite into results/, `make bench-all` every library of this repository
# too, `make reproduce` the seeds' headline experiments into results/reproduce/,
# `make install` installs into PREFIX (and DESTDIR), `make uninstall` removes it again,
# `make deb` builds the Debian package (docs/packaging.md).
BUILD   ?= build
PREFIX  ?= /usr/local
VENV    ?= .venv
PYTHON  ?= python3
GENERATOR := $(shell command -v ninja >/dev/null 2>&1 && echo Ninja || echo "Unix Makefiles")

.PHONY: all build configure venv test test-c test-lab bench bench-all peers reproduce clean \
        install uninstall deb

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

bench: peers build venv
	$(VENV)/bin/locus compare --output results

bench-all: build venv
	$(VENV)/bin/locus compare --allocators all --output results/all

peers:
	@lab/install-peers.sh

reproduce: build venv
	$(VENV)/bin/locus reproduce --output results/reproduce

# DESTDIR (a staging root) and LAB (venv, system or none: how the lab's `locus` command gets
# its Python; packaging/finish.cmake) reach the install step through the environment.
LAB ?= venv
install: build
	LAB=$(LAB) cmake --install $(BUILD) --prefix $(PREFIX)

uninstall:
	packaging/uninstall.sh $(PREFIX)

deb: build
	packaging/deb.sh $(BUILD)

clean:
	rm -rf $(BUILD) results
