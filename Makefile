# The two commands a user needs: `make test` and `make demo`. Everything else is a step of them.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := $(CURDIR)/.venv
BIN := $(VENV)/bin
# FQCN lookups need the collection under ansible_collections/<ns>/<name>: a link to the
# checkout, so that they always see the working tree.
COLLECTIONS := $(CURDIR)/.build/collections
COLLECTION := $(COLLECTIONS)/ansible_collections/blackwell/gpu_node
# ansible-test resolves links and insists on a real ansible_collections/<ns>/<name> directory, so sanity runs on a
# fresh copy of the files git would commit. The copy sits outside any git repository: ansible-test then lists its
# files itself, which needs no git (the Debian 13 image, where the newest core runs, has none).
SANITY_ROOT := /var/tmp/blackwell-sanity$(subst /,-,$(CURDIR))
SANITY_COPY := $(SANITY_ROOT)/ansible_collections/blackwell/gpu_node
# ansible-test fetches a get-pip.py named after the pip its release pins (2.16: 23.1.2, 2.19: 24.2, 2.21: 25.2)
# from a host this network cannot reach, unless the cache holds one.
GET_PIP_CACHE := $(foreach pip,23_1_2 24_2 25_2,$(HOME)/.ansible/test/cache/get_pip_$(pip).py)

# The ansible-core releases other than the toolchain's that the collection supports. Each has a virtualenv of its
# own (requirements/core-VERSION.txt), in which `make molecule` runs the unit tests, a syntax check of every
# playbook and the default scenario, beside the other scenarios, and `make sanity` runs ansible-test on the oldest
# and the newest. Those that need a newer Python than this machine's
# (2.20 and later need 3.12) have theirs made, and their job run, in the Debian 13 image (python3 3.13).
CORES := 2.16 2.18 2.21
CONTAINER_CORES := 2.21
CORE_VENVS := $(foreach core,$(CORES),$(CURDIR)/.build/core-$(core))
CONTAINER_CORE_VENVS := $(foreach core,$(CONTAINER_CORES),$(CURDIR)/.build/core-$(core))

export PATH := $(BIN):$(PATH)
export ANSIBLE_COLLECTIONS_PATH := $(COLLECTIONS)
export ANSIBLE_FORCE_COLOR ?= 0
export PY_COLORS ?= 0
# Every Ansible run imports the collection's plugins: with bytecode written once, no run compiles them again (an
# environment that forbids bytecode, as CI's does, would make each of the thousand-odd runs of `make test` do it).
unexport PYTHONDONTWRITEBYTECODE
# The virtualenvs made here are installed without compiling: the `ansible` package alone is tens of thousands of
# files, of which a run imports a few hundred, compiled once when first imported. Compiling all of it took half of
# the toolchain's install, which nothing else overlaps. Debian 13's (core 2.21) is compiled: sanity runs it from a
# read-only mount, where nothing imported could be written back.

.PHONY: help test core-venvs toolchain lint sanity units node-python integration hostile installed molecule demo engine build lock clean bench-wait docs ee \
	bench-site bench-upgrade bench-installer bench-diagnoses bench-parsers ml-stack-real device-evidence mutation stack-lock

help:
	@echo "make test   lint, sanity, unit tests and every molecule scenario (what CI runs)"
	@echo "make demo   provision a container as a GPU node with the site playbook and serve SGLang on it (stand-ins: see README)"
	@echo "make build  build the collection tarball"
	@echo "make docs   build the documentation site (antsibull-docs, Sphinx) into .build/docs"
	@echo "make ee     build the execution environment and run site in it against the demo node, as AWX does"
	@echo "make node-python  the modules' unit tests on the oldest managed-node Python supported (part of make test)"
	@echo "make hostile  every module as root against a tree an unprivileged user made hostile (part of make test)"
	@echo "make bench-wait  wait_for_server against wait_for and a grep loop: false alarms, latency, CPU"
	@echo "make bench-site  site's converged run on 1 and 8 nodes, docker and SSH (pipelining on, off), against as many no-op tasks (BENCH_SITE_ARGS='--fleet 0 --skip-ssh')"
	@echo "make bench-upgrade  one node's time out of service in an upgrade, task by task, against a reinstall in place"
	@echo "make bench-installer  pip against uv building the real cu128 stack from PyPI and from a wheelhouse (GBs, minutes); a stack profile's lock instead, file by file compared: BENCH_INSTALLER_ARGS='--lock PROFILE'"
	@echo "make bench-diagnoses  failed start-ups diagnosed by the catalogue or only generically, tuned and held-out logs apart"
	@echo "make bench-parsers  the parsers of outside text on a hostile MiB, beside the patterns they replaced"
	@echo "make mutation  mutation testing of plugins/module_utils and plugins/filter, a score per file (slow; FILES=... JOBS=... DEADLINE=...)"
	@echo "make device-evidence  check that tests/data/h200 was recorded on the roles and plugins of this tree"
	@echo "make lock   re-resolve requirements/tools.in and core-*.in into their .txt pins"
	@echo "make stack-lock PROFILE=name [AGAINST=other]  resolve a stack profile's lock from its indexes (roles/stack/files/locks), and what changed from other's"
	@echo "make clean  remove the toolchain, build output and molecule containers"

# The steps that run on this machine one after another (the unit tests first, the quickest to fail; lint and the
# installed tarball, mostly one process each; sanity, pylint and friends in ansible-test's own virtualenvs on three
# cores; the integration tests, Ansible against real processes on this machine, no containers; the hostile-user
# suite), beside the molecule scenarios, which spend much of their time waiting on apt, pip and the servers they
# start. Meanwhile the other cores' virtualenvs are made side by side (pip mostly waits on the network), before
# the scenarios and sanity, which use them; once the steps beside are done, the scenarios take a third lane. Each
# step's output is kept in .build/STEP.log and printed when all are done, with its seconds; any failing fails
# `make test`.
BESIDE := units lint installed node-python sanity integration hostile
BESIDE_DONE := $(CURDIR)/.build/beside.done
CORE_VENVS_DONE := $(CURDIR)/.build/core-venvs.done
test: toolchain engine
	mkdir -p $(CURDIR)/.build
	rm -f $(CURDIR)/.build/beside.times $(BESIDE_DONE) $(CORE_VENVS_DONE)
	@echo "==> $(BESIDE) one after another beside molecule; their output in $(foreach step,$(BESIDE),$(CURDIR)/.build/$(step).log)"
	{ beside_status=0; for step in $(BESIDE); do started=$$SECONDS; step_status=passed; \
	    if [ $$step = sanity ]; then while [ ! -e $(CORE_VENVS_DONE) ]; do sleep 2; done; fi; \
	    $(MAKE) --no-print-directory $$step >$(CURDIR)/.build/$$step.log 2>&1 || { beside_status=1; step_status=FAILED; }; \
	    printf '    %-22s %-28s %5d s\n' $$step $$step_status $$((SECONDS - started)) >>$(CURDIR)/.build/beside.times; done; \
	  touch $(BESIDE_DONE); exit $$beside_status; } & beside=$$!; \
	venvs_status=0; $(MAKE) --no-print-directory -j3 core-venvs || venvs_status=$$?; echo $$venvs_status >$(CORE_VENVS_DONE); \
	molecule_status=0; $(MAKE) --no-print-directory molecule WIDEN_WHEN=$(BESIDE_DONE) || molecule_status=$$?; \
	beside_status=0; wait $$beside || beside_status=$$?; \
	for step in $(BESIDE); do echo "==> $$step:"; cat $(CURDIR)/.build/$$step.log; done; \
	echo "==> beside molecule, one after another:"; cat $(CURDIR)/.build/beside.times; \
	[ $$molecule_status = 0 ] && [ $$beside_status = 0 ]

core-venvs: $(addsuffix /.installed,$(CORE_VENVS))

$(BIN)/.toolchain: requirements/tools.txt
	@$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || tests/fixtures/require-debian-package.sh python3-venv
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --no-compile --disable-pip-version-check -q -r requirements/tools.txt
	touch $@

# The modules Ansible runs on this machine (the integration and hostile suites, the scenarios' localhost tasks) keep
# their byte code between runs, as the scenarios' nodes do (tests/fixtures/node_image/ansiballz_bytecode_cache.py).
BYTECODE_CACHE_HOOK := $(BIN)/.ansiballz-bytecode-cache
$(BYTECODE_CACHE_HOOK): tests/fixtures/node_image/ansiballz_bytecode_cache.py $(BIN)/.toolchain
	site=$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'); \
	cp $< "$$site/ansiballz_bytecode_cache.py"; \
	echo 'import ansiballz_bytecode_cache; ansiballz_bytecode_cache.install("$(CURDIR)/.build/ansiballz-bytecode")' \
	  >"$$site/blackwell_ansiballz_bytecode_cache.pth"
	touch $@

$(COLLECTION):
	mkdir -p $(dir $@)
	ln -sfn $(CURDIR) $@

toolchain: $(BIN)/.toolchain $(BYTECODE_CACHE_HOOK) $(COLLECTION)

# As a certification or user pipeline runs it: without this Makefile's collections path, so that the
# collection resolves by itself from a fresh clone.
lint: toolchain
	env -u ANSIBLE_COLLECTIONS_PATH ansible-lint
	antsibull-changelog lint
	antsibull-docs lint-collection-docs --plugin-docs .

# The documentation site (antsibull-docs and Sphinx), in .build/docs/build/html; not part of `make test`.
DOCS := $(CURDIR)/.build/docs
docs: toolchain
	rm -rf $(DOCS) && mkdir -p $(DOCS)
	antsibull-docs sphinx-init --use-current --lenient --dest-dir $(DOCS) blackwell.gpu_node
	cd $(DOCS) && ./build.sh
	@echo "The site: $(DOCS)/build/html/index.html"

$(GET_PIP_CACHE): tests/sanity/get_pip.py
	mkdir -p $(dir $@)
	cp tests/sanity/get_pip.py $@

# ansible-test sanity on the toolchain's core over every file git has, and on the oldest supported core and the
# newest over the built tarball's files, as Automation Hub's certification runs it on each core: each in its own
# virtualenvs. The newest runs in the Debian 13 image, with a HOME of its own here (ansible-test's virtualenvs and
# get-pip cache), kept between runs as the host's is.
SANITY_HOME_DEBIAN13 := $(HOME)/.cache/blackwell-gpu-node/debian13-home
SANITY_SHIPPED := $(SANITY_ROOT)/shipped/ansible_collections/blackwell/gpu_node
PINNED_CORE := $(shell sed -n 's/^ansible-core==//p' requirements/tools.txt)
sanity: toolchain $(GET_PIP_CACHE) $(CURDIR)/.build/core-2.16/.installed $(CURDIR)/.build/core-2.21/.installed
	tests/fixtures/require-debian-package.sh shellcheck shellcheck
	rm -rf $(SANITY_ROOT) && mkdir -p $(SANITY_COPY) $(SANITY_SHIPPED)
	git ls-files -z --cached --others --exclude-standard \
	  | tar --null --ignore-failed-read -T - -c | tar -x -C $(SANITY_COPY)
	cd $(SANITY_COPY) && ansible-galaxy collection build --output-path $(SANITY_ROOT) >/dev/null
	tar -xzf $(SANITY_ROOT)/blackwell-gpu_node-*.tar.gz -C $(SANITY_SHIPPED)
	mkdir -p $(SANITY_HOME_DEBIAN13)/.ansible/test/cache
	cp tests/sanity/get_pip.py $(SANITY_HOME_DEBIAN13)/.ansible/test/cache/get_pip_25_2.py
	failed=; \
	echo "==> ansible-test sanity on ansible-core $(PINNED_CORE), every file"; \
	(cd $(SANITY_COPY) && ansible-test sanity --venv --python 3.11 --color no) || failed="$$failed $(PINNED_CORE)"; \
	echo "==> ansible-test sanity on ansible-core 2.16, the tarball's files"; \
	(cd $(SANITY_SHIPPED) && $(CURDIR)/.build/core-2.16/bin/ansible-test sanity --venv --python 3.11 --color no) \
	  || failed="$$failed 2.16"; \
	echo "==> ansible-test sanity on ansible-core 2.21, the tarball's files, in the Debian 13 image"; \
	docker run --rm --network host -v $(PIP_CA):/etc/ssl/certs/ca-certificates.crt:ro \
	  -e PIP_CERT=/etc/ssl/certs/ca-certificates.crt -e HOME=$(SANITY_HOME_DEBIAN13) -v $(CURDIR):$(CURDIR):ro \
	  -v $(SANITY_HOME_DEBIAN13):$(SANITY_HOME_DEBIAN13) -v $(SANITY_ROOT):$(SANITY_ROOT) -w $(SANITY_SHIPPED) \
	  "$$(tests/fixtures/base_image/build.sh debian13)" \
	  $(CURDIR)/.build/core-2.21/bin/ansible-test sanity --venv --python 3.13 --color no || failed="$$failed 2.21"; \
	if [ -n "$$failed" ]; then echo "ansible-test sanity failed on ansible-core$$failed" >&2; exit 1; fi

units: toolchain
	pytest tests/unit

# The modules run through Ansible against real processes on this machine.
integration: toolchain
	pytest tests/integration

# The modules' unit tests on the oldest Python the collection supports on a managed node (tests/config.yml): Debian
# 11's python3 3.9, in a container without a network, installing pinned wheels fetched here
# (tests/fixtures/node_python). The checkout is mounted read-only at its own path, where the collections link points.
NODE_PYTHON_TESTS := tests/unit/plugins/module_utils tests/unit/plugins/modules
node-python: toolchain engine
	image=$$(tests/fixtures/base_image/build.sh debian11); wheels=$$(tests/fixtures/node_python/build.sh); \
	docker run --rm --network none -e PYTHONDONTWRITEBYTECODE=1 -v $(CURDIR):$(CURDIR):ro -w $(CURDIR) "$$image" \
	  sh tests/fixtures/node_python/run_units.sh "$$wheels" $(NODE_PYTHON_TESTS)

# Every module run as root against a tree an unprivileged user made hostile, each run in a private mount namespace
# whose system directories are overlays (tests/hostile; needs root). The table of module x case is printed and
# written to .build/hostile/table.txt. HOSTILE_COLLECTION=DIR runs it against another copy of the collection,
# HOSTILE_REPORT_ONLY=1 records every outcome instead of asserting (a BEFORE table), HOSTILE_TABLE=FILE writes
# the table there.
hostile: toolchain
	pytest tests/hostile

# The built tarball ships what it must and nothing test-only, Galaxy's importer passes it, it installs, and its
# role and filter resolve by FQCN outside the checkout.
installed: toolchain
	tests/installed/run.sh

engine:
	tests/fixtures/docker-engine.sh

# The scenarios name their images and fixture repositories through these variables (each is
# built once and named by a digest of what it is built from). The demo and the EE need only the
# Debian 12 image and the two fixture repositories: a cold `make demo` builds nothing else.
DEMO_FIXTURES = BLACKWELL_IMAGE_DEBIAN12=$$(tests/fixtures/base_image/build.sh debian12); \
	BLACKWELL_CUDA_REPO=$$(tests/fixtures/cuda_apt_repo/build.sh); \
	BLACKWELL_STACK_INDEX=$$(tests/fixtures/stack_index/build.sh); \
	export BLACKWELL_IMAGE_DEBIAN12 BLACKWELL_CUDA_REPO BLACKWELL_STACK_INDEX
FIXTURES = $(DEMO_FIXTURES); \
	BLACKWELL_IMAGE_CPYTHON=$$(tests/fixtures/base_image/build.sh debian12-cpython); \
	BLACKWELL_IMAGE_SYSTEMD=$$(tests/fixtures/base_image/build.sh debian12-systemd); \
	BLACKWELL_GATEWAY_WHEELS=$$(tests/fixtures/gateway_wheels/build.sh); \
	export BLACKWELL_IMAGE_CPYTHON BLACKWELL_IMAGE_SYSTEMD BLACKWELL_GATEWAY_WHEELS
# The scenarios' nodes keep the byte code of the code Ansible ships with each module between module runs
# (tests/fixtures/node_image): thousands of tasks share two cores. The demo, the EE and the benchmarks keep the
# plain images, as a managed host has them.
SCENARIO_IMAGES = BLACKWELL_IMAGE_DEBIAN12=$$(tests/fixtures/node_image/build.sh "$$BLACKWELL_IMAGE_DEBIAN12"); \
	BLACKWELL_IMAGE_SYSTEMD=$$(tests/fixtures/node_image/build.sh "$$BLACKWELL_IMAGE_SYSTEMD")


# A command in the Debian 13 image: on the host's network, with the checkout at its own path, and pip trusting the
# certificates pip trusts here.
PIP_CA := $(or $(PIP_CERT),/etc/ssl/certs/ca-certificates.crt)
IN_DEBIAN13 = docker run --rm --network host -v $(PIP_CA):/etc/ssl/certs/host-ca-certificates.crt:ro \
	-e PIP_CERT=/etc/ssl/certs/host-ca-certificates.crt -v $(CURDIR):$(CURDIR) -w $(CURDIR) \
	"$$(tests/fixtures/base_image/build.sh debian13)"

$(CURDIR)/.build/core-%/.installed: requirements/core-%.txt
	rm -rf $(@D) && $(PYTHON) -m venv $(@D)
	$(@D)/bin/pip install --no-compile --disable-pip-version-check -q -r $<
	touch $@

$(addsuffix /.installed,$(CONTAINER_CORE_VENVS)): $(CURDIR)/.build/core-%/.installed: requirements/core-%.txt
	rm -rf $(@D) && mkdir -p $(@D)
	$(IN_DEBIAN13) python3 -m venv $(@D)
	$(IN_DEBIAN13) $(@D)/bin/pip install --disable-pip-version-check -q -r $<
	touch $@

# `make molecule SCENARIO=NAME` runs one scenario, with the images and fixtures it needs built. Without it, every
# scenario and every other core's job, MOLECULE_LANES (default 2) at once, and one more once WIDEN_WHEN (a path)
# exists, each one's output in .build/molecule/NAME.log, all printed at the end with a line per job
# (tests/run_scenarios.py).
molecule: toolchain engine $(if $(SCENARIO),,$(addsuffix /.installed,$(CORE_VENVS)))
	$(FIXTURES); $(SCENARIO_IMAGES); $(if $(SCENARIO),molecule test -s $(SCENARIO),python tests/run_scenarios.py $(if $(WIDEN_WHEN),--widen-when $(WIDEN_WHEN)) $(foreach core,$(CORES),\
	  --core $(core)=$(CURDIR)/.build/core-$(core)$(if $(filter $(core),$(CONTAINER_CORES)),@$$(tests/fixtures/base_image/build.sh debian13))))

# The ml_stack role installing the real cu128 stack from PyPI (several GB of wheels); not part of `make test`.
# Its scenario lives outside molecule/, where `molecule test --all` does not look.
ml-stack-real: toolchain engine
	$(FIXTURES); MOLECULE_GLOB='tests/molecule_real/*/molecule.yml' molecule test -s ml_stack_real

demo: toolchain engine
	$(DEMO_FIXTURES); tests/demo.sh

# The root execution-environment.yml built as a user builds it, FROM a stand-in for Automation Platform 2.5's EE base
# (ansible-core 2.16), running site against a fresh demo node through ansible-runner, as AWX runs a job; not part of
# `make test` (minutes).
ee: toolchain engine
	$(DEMO_FIXTURES); tests/ee/run.sh

# Benchmarks print their numbers side by side with the alternative; not part of `make test`.
bench-wait: toolchain
	python bench/wait_for_server.py

# BENCH_SITE_ARGS: bench/site.py's options, e.g. --fleet 0 (no fleet row) or --skip-ssh (no SSH rows).
bench-site: toolchain engine
	$(DEMO_FIXTURES); python bench/site.py $(BENCH_SITE_ARGS)

bench-upgrade: toolchain engine
	$(FIXTURES); python bench/upgrade.py

# BENCH_INSTALLER_ARGS: bench/installer.py's options, e.g. --lock sglang-0.5.17-cu130 (install that profile's lock).
bench-installer: toolchain
	python bench/installer.py $(BENCH_INSTALLER_ARGS)

bench-diagnoses: toolchain
	python bench/diagnosis_rate.py

bench-parsers: toolchain
	python bench/parsers.py

# Mutation testing (mutmut's mutants) of the cores against the unit tests, over JOBS workers each on its own staged
# copy: a report per file in tests/output/mutation, and the score of each file tested in full in
# tests/mutation/scores.txt, the current report. Not part of `make test`: minutes per file. DEADLINE=SECONDS stops
# starting mutants then and writes partial reports.
JOBS ?= $(shell nproc)
DEADLINE ?= 0
mutation: toolchain
	python tests/mutation/parallel.py -j $(JOBS) --deadline $(DEADLINE) $(FILES)

# The real-host evidence in tests/data/h200 belongs to the code it ran: fails when roles, plugins or
# playbooks changed since tests/device/record_site.sh last ran on a lent GPU host.
device-evidence:
	@recorded=$$(sed -n 's/^tree digest: //p' tests/data/h200/site_commit.txt); current=$$(tests/device/tree_digest.sh); \
	if [ "$$recorded" = "$$current" ]; then echo "tests/data/h200 was recorded on this code ($$current, $$(sed -n 's/^commit: //p' tests/data/h200/site_commit.txt))"; \
	else echo "tests/data/h200 was recorded on code $$recorded, the tree is $$current: re-run tests/device/record_site.sh on a lent GPU host (tests/device/README.md)" >&2; exit 1; fi

build: toolchain
	ansible-galaxy collection build --force --output-path .build

lock: engine
	rm -rf .build/lock && $(PYTHON) -m venv .build/lock
	.build/lock/bin/pip install --disable-pip-version-check -q -r requirements/tools.in
	{ echo '# Generated by `make lock` from requirements/tools.in: every package of the toolchain, pinned.'; \
	  .build/lock/bin/pip freeze --all --exclude pip --exclude setuptools; } > requirements/tools.txt
	for core in $(filter-out $(CONTAINER_CORES),$(CORES)); do \
	  rm -rf .build/lock && $(PYTHON) -m venv .build/lock; \
	  .build/lock/bin/pip install --disable-pip-version-check -q -r requirements/core-$$core.in; \
	  { echo "# Generated by \`make lock\` from requirements/core-$$core.in: ansible-core $$core and what its tests need, pinned."; \
	    .build/lock/bin/pip freeze --all --exclude pip --exclude setuptools; } > requirements/core-$$core.txt; \
	done
	for core in $(CONTAINER_CORES); do \
	  rm -rf .build/lock && mkdir -p .build/lock && $(IN_DEBIAN13) python3 -m venv $(CURDIR)/.build/lock; \
	  $(IN_DEBIAN13) .build/lock/bin/pip install --disable-pip-version-check -q -r requirements/core-$$core.in; \
	  { echo "# Generated by \`make lock\` from requirements/core-$$core.in, inside the Debian 13 image: ansible-core $$core and what its tests need, pinned."; \
	    $(IN_DEBIAN13) .build/lock/bin/pip freeze --all --exclude pip --exclude setuptools; } > requirements/core-$$core.txt; \
	done

# A stack profile's lock, resolved by pip from the profile's indexes for every Python and machine it runs on
# (hacking/stack_lock.py); AGAINST=other prints what changed from other's lock (a profile or a lock file).
# STACK_LOCK_ARGS: the tool's other options, e.g. --mirror ORIG=NEW or --environments cp312-x86_64.
stack-lock: toolchain
	$(if $(PROFILE),,$(error name the profile: make stack-lock PROFILE=name [AGAINST=other]))
	$(BIN)/python hacking/stack_lock.py $(PROFILE) $(if $(AGAINST),--against $(AGAINST)) $(STACK_LOCK_ARGS)

clean:
	-$(BIN)/molecule destroy --all
	-docker rm -f blackwell-demo blackwell-ee-node
	rm -rf $(VENV) .build tests/output $(SANITY_ROOT)
