# SPDX-License-Identifier: BSD-2-Clause
# The front door. `scripts/bootstrap` installs what these targets need.
BUILD ?= build
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST := $(VENV)/bin/pytest

.PHONY: all build build-sanitize build-fuzz test test-unit test-prog test-net test-offline \
	test-sanitize fuzz demo clean lint deb test-pkg

all: build

$(BUILD)/build.ninja:
	meson setup $(BUILD)

build: $(BUILD)/build.ninja
	ninja -C $(BUILD)

# Everything: C unit tests, then two lanes side by side (scripts/test-lanes):
# the testbed tier (tests/net), and at nice 19 the tiers that need only CPU
# (test-offline: unit, prog, cli and pkg, the sanitizer build's tests, the
# fuzzers).
test: build lint
	meson test -C $(BUILD) --print-errorlogs
	MAKE=$(MAKE) BUILD=$(BUILD) ./scripts/test-lanes

# Beside the testbed lane: no pytest cache shared with it (pytest's own
# temporary directories are per session already).
test-offline: build
	$(PYTEST) -v -p no:cacheprovider --durations=20 tests/unit tests/prog tests/cli tests/pkg
	@date +'veloz: offline lane: the sanitizer build from %T'
	$(MAKE) test-sanitize
	@date +'veloz: offline lane: the fuzzers from %T'
	$(MAKE) fuzz
	@date +'veloz: offline lane: done at %T'

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
	VELOZ_BUILD_DIR=$(abspath $(SANITIZE_BUILD)) $(PYTEST) -v -p no:cacheprovider tests/prog \
		-k native

test-unit: build
	meson test -C $(BUILD) --print-errorlogs
	$(PYTEST) -v tests/unit

test-prog: build
	$(PYTEST) -v tests/prog

# `make deb`'s package in a clean Debian 12 root (debootstrap; the mirror only)
test-pkg:
	$(PYTEST) -v tests/pkg

test-net: build
	$(PYTEST) -v --durations=25 tests/net

# libFuzzer, clang, ASan + UBSan: each NF differentially (kernel vs native),
# the config parser, the control protocol on the stateful NFs, the UDP stack
# and the UDP poller's control protocol,
# FUZZ_SECONDS each (millions of inputs for most: the suite's look for a
# regression; `make fuzz-long` is the campaign), seeded from tests/vectors.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 6
FUZZ_NFS ?= drop pass tx redirect memaccess headroom router ddos lb
FUZZ_CTL_NFS ?= router ddos lb
# coverage-ignore.txt: hot table loops with nothing for coverage to find
# (a library built -fno-sanitize=all leaves that flag unused: not an error)
FUZZ_CFLAGS = -fsanitize=fuzzer-no-link -fno-sanitize-recover=all \
	-fsanitize-coverage-ignorelist=$(CURDIR)/tests/fuzz/coverage-ignore.txt \
	-Wno-unused-command-line-argument
$(FUZZ_BUILD)/build.ninja:
	CC=clang meson setup $(FUZZ_BUILD) -Dfuzz=true -Db_sanitize=address,undefined \
		-Db_lundef=false -Dc_args='$(FUZZ_CFLAGS)'

build-fuzz: $(FUZZ_BUILD)/build.ninja
	ninja -C $(FUZZ_BUILD)

fuzz: build-fuzz
	$(PY) tests/fuzz/seeds.py $(FUZZ_BUILD)/seeds
	$(PY) tests/fuzz/ops.py $(FUZZ_BUILD)/ops
	set -e; for nf in $(FUZZ_NFS); do \
		mkdir -p $(FUZZ_BUILD)/corpus/$$nf; \
		log=$(FUZZ_BUILD)/fuzz-$$nf.log; dir=$(FUZZ_BUILD)/nf; \
		[ -e $$dir/$$nf.so ] || dir=$(FUZZ_BUILD)/tests/nf; \
		ops=$(FUZZ_BUILD)/ops/$$nf.ops; [ -e $$ops ] || ops=; \
		VZ_FUZZ_OPS=$$ops VZ_FUZZ_NF=$$nf VZ_FUZZ_NF_DIR=$$dir VZ_FUZZ_SET=$$( \
			[ $$nf = memaccess ] && echo accesses=64; [ $$nf = redirect ] && echo port=5; \
			[ $$nf = headroom ] && echo delta=-20; true) \
			$(FUZZ_BUILD)/tests/fuzz/fuzz-nf-diff -max_total_time=$(FUZZ_SECONDS) \
			-max_len=9216 -artifact_prefix=$(FUZZ_BUILD)/ -print_final_stats=1 \
			$(FUZZ_BUILD)/corpus/$$nf $(FUZZ_BUILD)/seeds/frames \
			$$(ls -d tests/fuzz/corpus/nf-$$nf 2>/dev/null) > $$log 2>&1 \
			|| { tail -40 $$log; echo "fuzz-nf-diff $$nf FAILED"; exit 1; }; \
		echo "fuzz-nf-diff $$nf: $$(grep -o 'number_of_executed_units: [0-9]*' $$log) frames, xdp == native"; \
	done
	mkdir -p $(FUZZ_BUILD)/corpus/config
	VZ_FUZZ_NF=memaccess VZ_FUZZ_NF_DIR=$(FUZZ_BUILD)/nf $(FUZZ_BUILD)/tests/fuzz/fuzz-config \
		-max_total_time=$(FUZZ_SECONDS) -artifact_prefix=$(FUZZ_BUILD)/ -print_final_stats=1 \
		$(FUZZ_BUILD)/corpus/config $(FUZZ_BUILD)/seeds/config $$(ls -d tests/fuzz/corpus/config 2>/dev/null) \
		> $(FUZZ_BUILD)/fuzz-config.log 2>&1 \
		|| { tail -40 $(FUZZ_BUILD)/fuzz-config.log; echo "fuzz-config FAILED"; exit 1; }
	@echo "fuzz-config: $$(grep -o 'number_of_executed_units: [0-9]*' $(FUZZ_BUILD)/fuzz-config.log) inputs"
	set -e; for nf in $(FUZZ_CTL_NFS); do \
		mkdir -p $(FUZZ_BUILD)/corpus/ctl-$$nf; log=$(FUZZ_BUILD)/fuzz-ctl-$$nf.log; \
		VZ_FUZZ_NF=$$nf VZ_FUZZ_NF_DIR=$(FUZZ_BUILD)/nf VZ_FUZZ_OPS=$(FUZZ_BUILD)/ops/$$nf.ops \
			$(FUZZ_BUILD)/tests/fuzz/fuzz-ctl -max_total_time=$(FUZZ_SECONDS) -max_len=4096 \
			-artifact_prefix=$(FUZZ_BUILD)/ -print_final_stats=1 \
			$(FUZZ_BUILD)/corpus/ctl-$$nf $(FUZZ_BUILD)/ops/ctl-$$nf $$(ls -d tests/fuzz/corpus/ctl-$$nf 2>/dev/null) \
			$$(ls -d tests/fuzz/regressions/ctl-$$nf 2>/dev/null) > $$log 2>&1 \
			|| { tail -40 $$log; echo "fuzz-ctl $$nf FAILED"; exit 1; }; \
		echo "fuzz-ctl $$nf: $$(grep -o 'number_of_executed_units: [0-9]*' $$log) sessions, all rolled back"; \
	done
	$(PY) tests/fuzz/stack_seeds.py $(FUZZ_BUILD)/seeds/stack
	mkdir -p $(FUZZ_BUILD)/corpus/stack
	$(FUZZ_BUILD)/tests/fuzz/fuzz-stack -max_total_time=$(FUZZ_SECONDS) -max_len=16384 \
		-artifact_prefix=$(FUZZ_BUILD)/ -print_final_stats=1 \
		$(FUZZ_BUILD)/corpus/stack $(FUZZ_BUILD)/seeds/stack $$(ls -d tests/fuzz/corpus/stack 2>/dev/null) \
		> $(FUZZ_BUILD)/fuzz-stack.log 2>&1 \
		|| { tail -40 $(FUZZ_BUILD)/fuzz-stack.log; echo "fuzz-stack FAILED"; exit 1; }
	@echo "fuzz-stack: $$(grep -o 'number_of_executed_units: [0-9]*' $(FUZZ_BUILD)/fuzz-stack.log) inputs, every frame in one outcome"
	mkdir -p $(FUZZ_BUILD)/corpus/sock-ctl
	$(FUZZ_BUILD)/tests/fuzz/fuzz-sock-ctl -max_total_time=$(FUZZ_SECONDS) -max_len=4096 \
		-artifact_prefix=$(FUZZ_BUILD)/ -print_final_stats=1 \
		$(FUZZ_BUILD)/corpus/sock-ctl $$(ls -d tests/fuzz/corpus/sock-ctl 2>/dev/null) \
		> $(FUZZ_BUILD)/fuzz-sock-ctl.log 2>&1 \
		|| { tail -40 $(FUZZ_BUILD)/fuzz-sock-ctl.log; echo "fuzz-sock-ctl FAILED"; exit 1; }
	@echo "fuzz-sock-ctl: $$(grep -o 'number_of_executed_units: [0-9]*' $(FUZZ_BUILD)/fuzz-sock-ctl.log) connections, nothing held after each"
	set -e; for t in route-file py-config; do \
		mkdir -p $(FUZZ_BUILD)/corpus/$$t; log=$(FUZZ_BUILD)/fuzz-$$t.log; \
		$(PY) tests/fuzz/fuzz_$$(echo $$t | tr - _).py --seconds $(FUZZ_SECONDS) \
			--seeds $(FUZZ_BUILD)/seeds/$$t -max_len=4096 -artifact_prefix=$(FUZZ_BUILD)/ \
			$(FUZZ_BUILD)/corpus/$$t $$(ls -d tests/fuzz/corpus/$$t tests/fuzz/regressions/$$t 2>/dev/null) \
			> $$log 2>&1 \
			|| { tail -40 $$log; echo "fuzz-$$t FAILED"; exit 1; }; \
		grep "^fuzz-$$t:" $$log; \
	done

# Hours, outside CI: every target toward FUZZ_LONG_RUNS executions (at most
# FUZZ_LONG_SECONDS each), one at a time under nice, its corpus minimised
# back into tests/fuzz/corpus (where `fuzz` starts from); a report per target.
FUZZ_LONG_RUNS ?= 10000000
FUZZ_LONG_SECONDS ?= 3600
fuzz-long: build-fuzz
	$(PY) tests/fuzz/seeds.py $(FUZZ_BUILD)/seeds
	$(PY) tests/fuzz/ops.py $(FUZZ_BUILD)/ops
	$(PY) tests/fuzz/stack_seeds.py $(FUZZ_BUILD)/seeds/stack
	$(PY) tests/fuzz/campaign.py --build $(FUZZ_BUILD) --runs $(FUZZ_LONG_RUNS) \
		--seconds $(FUZZ_LONG_SECONDS) $(FUZZ_LONG_TARGETS)

# The Debian package, $(DEB_DIR)/veloz_VERSION_amd64.deb: dpkg-buildpackage on
# a copy of the tree (tracked and new files, with deploy/debian as debian/),
# its Build-Depends installed first if missing. Its test: tests/pkg.
DEB_DIR ?= build-deb
deb:
	rm -rf $(DEB_DIR)/src $(DEB_DIR)/veloz_* && mkdir -p $(DEB_DIR)/src
	git ls-files -z --cached --others --exclude-standard \
		| tar --null -T - --ignore-failed-read -cf - | tar -C $(DEB_DIR)/src -xf -
	rm -rf $(DEB_DIR)/src/debian && cp -r deploy/debian $(DEB_DIR)/src/debian
	cd $(DEB_DIR)/src && { dpkg-checkbuilddeps 2>/dev/null || \
		DEBIAN_FRONTEND=noninteractive apt-get build-dep -y -q --no-install-recommends ./; }
	cd $(DEB_DIR)/src && VELOZ_COMMIT=$$(PYTHONPATH=$(CURDIR)/python /usr/bin/python3 -c \
		'from veloz.core.version import git_commit; print(git_commit("$(CURDIR)") or "")') \
		DEB_BUILD_OPTIONS="nocheck noautodbgsym parallel=$$(nproc)" \
		dpkg-buildpackage -b -us -uc
	@ls $(DEB_DIR)/veloz_*_amd64.deb

demo: build
	$(VENV)/bin/veloz demo

# Style is part of the suite: C by .clang-format, Python by ruff, the
# include and import graphs by their layers, function and file sizes, and
# every path a comment or document names.
lint:
	clang-format --dry-run -Werror $$(git ls-files '*.c' '*.h')
	$(PY) scripts/check_layers.py
	$(PY) scripts/check_sizes.py
	$(PY) scripts/check_paths.py
	$(VENV)/bin/ruff check python tests bench nf/fixtures
	$(VENV)/bin/ruff format --check python tests bench nf/fixtures

clean:
	rm -rf $(BUILD) $(SANITIZE_BUILD) $(FUZZ_BUILD)
