# SPDX-License-Identifier: BSD-2-Clause
# The front door. `scripts/bootstrap` installs what these targets need.
BUILD ?= build
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST := $(VENV)/bin/pytest

.PHONY: all build build-sanitize test test-unit test-prog test-net test-sanitize demo clean lint

all: build

$(BUILD)/build.ninja:
	meson setup $(BUILD)

build: $(BUILD)/build.ninja
	ninja -C $(BUILD)

# Everything: C unit tests, the Python tiers (unit, prog, net; root ones run
# as root), then the sanitizer build's C tests and native replays.
test: build
	meson test -C $(BUILD) --print-errorlogs
	$(PYTEST) -v tests
	$(MAKE) test-sanitize

# ASan + UBSan build of all native code, in its own build directory.
SANITIZE_BUILD ?= build-sanitize
$(SANITIZE_BUILD)/build.ninja:
	meson setup $(SANITIZE_BUILD) -Db_sanitize=address,undefined -Db_lundef=false \
		-Dc_args=-fno-sanitize-recover=all

build-sanitize: $(SANITIZE_BUILD)/build.ninja
	ninja -C $(SANITIZE_BUILD)

# The native NFs under the sanitizers: every vector through every NF.
test-sanitize: build-sanitize
	meson test -C $(SANITIZE_BUILD) --print-errorlogs
	VELOZ_BUILD_DIR=$(abspath $(SANITIZE_BUILD)) $(PYTEST) -v tests/prog -k native

test-unit: build
	meson test -C $(BUILD) --print-errorlogs
	$(PYTEST) -v tests/unit

test-prog: build
	$(PYTEST) -v tests/prog

test-net: build
	$(PYTEST) -v tests/net

demo: build
	$(VENV)/bin/veloz demo

lint:
	$(VENV)/bin/ruff check python tests

clean:
	rm -rf $(BUILD) $(SANITIZE_BUILD)
