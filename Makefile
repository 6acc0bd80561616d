# Every target works on a fresh machine: missing tools are installed or built.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
TESTENV := tests/testenv/testenv.sh
ENV_SH := target/testenv/env.sh
BENCH ?= bench::
BIN := target/debug/cloud-resource-operator
OPERATOR_NAMESPACE ?= cloud-resource-operator
BUNDLE_DIR ?= bundle
# cargo-deny, built once (a debug build: two minutes on 2 cores, a fifth of
# the release build's) and cached by version outside the repository.
CARGO_DENY_VERSION := 0.20.2
CARGO_DENY_ROOT := $(HOME)/.cache/cro-tools/cargo-deny-$(CARGO_DENY_VERSION)

.PHONY: help deps local-deps build crds bundle image release testenv-up testenv-down test bench proptest-long lint deny run

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

deps: ## install missing system packages (Debian)
	@tests/testenv/install-deps.sh

local-deps: ## as deps, for the local environment, which needs root (says so first)
	@tests/testenv/install-deps.sh --local-environment

build: ## build the operator and all tests
	cargo build --workspace --all-targets

crds: ## regenerate crds/ and docs/reference.md from the Rust types, and the Helm chart's copies of crds/ and config/
	cargo run --quiet -- crd --output-dir crds --reference docs/reference.md
	cargo run --quiet -- crd --output-dir deploy/helm/crds
	cp config/cloud-resource*.yaml deploy/helm/config/

bundle: deps ## regenerate bundle/ (the OLM bundle) from the Helm chart, crds/ and config/samples/; a release's, pinned by digest: BUNDLE_DIR=target/bundle BUNDLE_VALUES="image.repository=... image.digest=sha256:..."
	@$(TESTENV) build
	rm -rf $(BUNDLE_DIR) && python3 deploy/bundle/generate.py $$(. tests/testenv/versions.env; echo $${CRO_TESTENV_CACHE:-$$HOME/.cache/cro-testenv}/helm-$$HELM_VERSION/bin/helm) $(BUNDLE_DIR) $(BUNDLE_VALUES)

image: ## the operator's image with no container daemon: target/image/cloud-resource-operator.tar (OCI), tagged as the chart's default, and its digest in cloud-resource-operator.digest (load it: tests/testenv/testenv.sh load-image FILE)
	cargo build --release --bin cloud-resource-operator
	deploy/image/build.sh

release: deps ## a release in target/dist/VERSION/: image archive and digest, packaged chart and OLM bundle pinned by it, kubectl plugin and krew manifest, SBOM, notes, SHA256SUMS (VERSION=x.y.z; REPOSITORY=registry/name, RELEASE_URL=where the plugin archive goes)
	@[ -n "$(VERSION)" ] || { echo "make release VERSION=x.y.z" >&2; exit 1; }
	cargo build --release --locked --bin cloud-resource-operator
	REPOSITORY="$(REPOSITORY)" RELEASE_URL="$(RELEASE_URL)" deploy/release/release.sh "$(VERSION)"

testenv-up: local-deps ## start the local control plane + kwok + moto (builds and caches binaries first time)
	@$(TESTENV) up

testenv-down: ## stop exactly what testenv-up started
	@$(TESTENV) down

# The whole suite. Starts the test environment if it is not running and
# stops it afterwards (one that was already running is left running). On a
# fresh machine the tests' Rust build runs beside the environment's build,
# whose downloads and image building leave the CPU idle for long stretches.
# The upgrade test's earlier operator (cached by commit) is built beside
# the suites, at the lowest priority, for the same reason; the upgrade
# suite, cargo's last, waits for it.
# The integration tests mostly wait on the API server and the emulator: on
# the project's 2-core machine three at a time finished the suite in 1400 s
# against 1855 s for two (docs/development.md).
RUST_TEST_THREADS ?= 3
export RUST_TEST_THREADS
test: local-deps ## run the whole test suite (unit, integration, end-to-end)
	@was_up=0; $(TESTENV) status && was_up=1 || true; \
	mkdir -p target; cargo test --workspace --all-targets --no-run >target/test-build.log 2>&1 & build=$$!; \
	$(TESTENV) up || { kill $$build 2>/dev/null || true; exit 1; }; \
	wait $$build || { cat target/test-build.log; echo "make test: building the tests failed" >&2; exit 1; }; \
	tail -n 1 target/test-build.log; \
	( exec nice -n 19 tests/testenv/earlier-operator.sh >target/earlier-operator.log 2>&1 ) & earlier=$$!; \
	set +e; ( set -a; . $(ENV_SH); set +a; cargo test --workspace --all-targets --no-fail-fast 2>&1 | tee target/test-output.log ); status=$$?; set -e; \
	pkill -P $$earlier 2>/dev/null || true; kill $$earlier 2>/dev/null || true; \
	[ $$was_up = 1 ] || $(TESTENV) down; \
	[ $$status = 0 ] || tests/failures.py target/test-output.log; \
	exit $$status

bench: local-deps ## rerunnable benchmarks (BENCH=bench::<name> for one): ready latency (BENCH_N=10); AWS calls at rest; scale over BENCH_CRS (2000) in-cluster BlobStorage and BENCH_DBS (100) Postgres and Redis, release build; raw results in target/bench/
	@$(TESTENV) up
	cargo build --release --bin cloud-resource-operator
	@mkdir -p target/bench; out=target/bench/$$(date -u +%Y-%m-%dT%H%M)-$$(git rev-parse --short HEAD).txt; \
	set -a; . $(ENV_SH); set +a; CRO_BENCH_BIN=$(CURDIR)/target/release/cloud-resource-operator \
	  cargo test --test integration -- --ignored --nocapture --test-threads 1 $(BENCH) 2>&1 | grep -E 'latency|aws calls|scale over|shards over|what each write|test result|panicked' | tee $$out; \
	echo "raw results: $$out (docs/bench-results/ keeps the runs docs/benchmarks.md quotes)"

proptest-long: ## the property tests with 20,000 cases each (make test runs 256)
	PROPTEST_CASES=20000 cargo test --release --test properties

lint: deny ## rustfmt, clippy (warnings are errors) and cargo-deny
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings

deny: ## cargo-deny's licenses, sources and bans checks of Cargo.lock (deny.toml; offline)
	@[ -x $(CARGO_DENY_ROOT)/bin/cargo-deny ] || \
	  cargo install cargo-deny --version $(CARGO_DENY_VERSION) --locked --debug --root $(CARGO_DENY_ROOT)
	$(CARGO_DENY_ROOT)/bin/cargo-deny check licenses sources bans

# With KUBECONFIG unset: the local environment, with both sample sets
# (in-cluster and AWS, against the emulator) in namespace $(DEMO_NAMESPACE).
# Otherwise: that cluster, CRDs and the configuration ConfigMaps that are
# missing there (existing ones are left as they are, and named).
DEMO_NAMESPACE ?= demo
# Builds only what running needs: the operator's binary (not the tests),
# and for the local environment no test-only tools (helm, promtool, the
# bundle validator); `make test` builds those when it first needs them.
run: ## run the operator in the foreground (local control plane and samples unless KUBECONFIG is set; with it, no root and nothing installed)
	@if [ -n "$${KUBECONFIG:-}" ]; then tests/testenv/install-deps.sh --existing-cluster; \
	else tests/testenv/install-deps.sh --local-environment; fi
	@[ -x $(BIN) ] || echo "building the operator's binary — first time only, about 11 min on 2 cores"
	cargo build --bin cloud-resource-operator
	@local=0; if [ -z "$${KUBECONFIG:-}" ]; then local=1; CRO_TESTENV_FOR=run $(TESTENV) up; set -a; . $(ENV_SH); set +a; fi; \
	kubectl apply --server-side -k crds/ >/dev/null; \
	kubectl create namespace $(OPERATOR_NAMESPACE) --dry-run=client -o yaml | kubectl apply -f - >/dev/null; \
	if [ $$local = 1 ]; then kubectl -n $(OPERATOR_NAMESPACE) apply -k config/ >/dev/null; \
	else config/install-missing.sh $(OPERATOR_NAMESPACE); fi; \
	if [ $$local = 1 ]; then \
	  kubectl create namespace $(DEMO_NAMESPACE) --dry-run=client -o yaml | kubectl apply -f - >/dev/null; \
	  if [ -n "$${CRO_TESTENV_REAL_NODE:-}" ]; then \
	    kubectl annotate --overwrite namespace $(DEMO_NAMESPACE) >/dev/null \
	      scheduler.alpha.kubernetes.io/node-selector=cro-testenv/real-node=true \
	      'scheduler.alpha.kubernetes.io/defaultTolerations=[{"key": "cro-testenv/real-node", "operator": "Exists", "effect": "NoSchedule"}]'; \
	    echo "in-cluster samples run on the real node $$CRO_TESTENV_REAL_NODE"; \
	  else echo "no real node ($${CRO_TESTENV_NO_REAL_NODE:-}): in-cluster samples run on kwok, their pods never start"; fi; \
	  kubectl -n $(DEMO_NAMESPACE) apply -f config/samples/ -f config/samples/aws/ >/dev/null; \
	  echo "CRDs, configuration and samples installed; in another shell: . $(ENV_SH); kubectl -n $(DEMO_NAMESPACE) get postgres,redis,blobstorages,smtpcredentialsets,postgressnapshots,redissnapshots"; \
	else \
	  echo "CRDs installed, configuration as listed above; try: kubectl apply -f config/samples/"; \
	fi; \
	exec $${CRO_TESTENV_IN_CLUSTER_DNS:-} $(BIN) run --operator-namespace $(OPERATOR_NAMESPACE)
