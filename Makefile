# SPDX-License-Identifier: BSD-2-Clause
# The front door. `scripts/bootstrap` installs what these targets need.
BUILD ?= build
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST := $(VENV)/bin/pytest

.PHONY: all build test test-unit test-prog test-net demo clean lint

all: build

$(BUILD)/build.ninja:
	meson setup $(BUILD)

build: $(BUILD)/build.ninja
	ninja -C $(BUILD)

test: build
	meson test -C $(BUILD) --print-errorlogs
	$(PYTEST) -v tests

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
	rm -rf $(BUILD)
