# Conveyor — every entry point a person or CI uses. Node 24 comes from node_modules (the `node`
# npm package), never from the machine, so `npm run`/`npx` are the only way scripts start.
SHELL := /bin/bash
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)

.PHONY: all deps system-deps node-deps build typecheck test test-unit test-integration test-python controlplane previous-release node observability keda images demo upgrade-demo bench bench-autoscale chaos lint depcheck release clean

all: build

system-deps:
	@bash scripts/system-deps.sh

# The first npm ci runs on the machine's node, and npm skips optional packages whose engines want
# a newer one (the OpenTelemetry SDK needs Node >= 22.15); once the pinned Node 24 is in
# node_modules/.bin (first on PATH), a second npm ci installs them too.
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund
	@if [ "$$(command -p node --version 2>/dev/null)" != "$$(node_modules/.bin/node --version)" ]; then \
	  npm ci --no-audit --no-fund; fi
	@touch $@

node-deps: node_modules/.installed

deps: system-deps node-deps

build: deps
	npm run build

typecheck: node-deps
	npm run typecheck

# Everything: the checks, the unit tests, then the integration tests against real Redis,
# PostgreSQL, a real Kubernetes control plane, Prometheus, an OpenTelemetry Collector and the
# built container images.
test: deps typecheck controlplane node observability images keda previous-release lint test-unit test-integration test-python

# Unit tests beside the code (`lib/ … api/ **/*.test.ts`): no Redis, PostgreSQL or control plane,
# under a minute; passes in a clean clone after `make node-deps` alone.
test-unit: node-deps
	npm run -s test:unit

# Integration tests under test/<area>/, one file at a time (they start real servers).
test-integration: deps controlplane node observability images keda previous-release
	npm run -s test:integration

# Formatting, the import rules (.dependency-cruiser.cjs, docs/architecture.md) and types.
lint: node-deps depcheck typecheck
	npm run -s format:check

depcheck: node-deps
	npm run -s depcheck

# The Python client's suite (clients/python/tests, Debian's python3 + pytest) against real Redis
# and real worker processes; pytest's exit 5 (no tests collected) is not a failure.
test-python: deps
	@cd clients/python && { /usr/bin/python3 -m pytest -q -p no:cacheprovider; rc=$$?; [ $$rc -eq 5 ] && rc=0; exit $$rc; }

# conveyor-worker and conveyor-operator from the Dockerfile with podman, no registry needed
# (cached under ~/.cache/conveyor/containers; docs/install.md). images/build.sh --force rebuilds.
images: node-deps
	@bash images/build.sh

controlplane:
	@bash test/controlplane/install.sh

# The previous release (a pinned commit of this repository, npm ci + build) for the mixed-version
# tests in test/upgrade, cached in ~/.cache/conveyor/release-<commit> (30 s cold).
previous-release: node-deps
	@bash scripts/previous-release.sh

# KEDA v2.21.0 (operator + metrics adapter) for the autoscaling comparison, built once from the Go
# module proxy into ~/.cache/conveyor (7 min cold on an idle machine, 54 min at load 20; +1.7 GB of modules; CONVEYOR_KEDA_ASSETS=/dir
# uses prebuilt ones). docs/autoscaling-vs-keda.md.
keda:
	@bash test/keda/install.sh

# A real node's kubelet (from the control plane's Kubernetes module) and its pause image, beside
# Debian's containerd, runc and CNI plugins (scripts/images-deps.sh); docs/node.md.
node: controlplane
	@bash scripts/images-deps.sh
	@bash test/node/install.sh

# Prometheus, promtool and an OpenTelemetry Collector for test/observability, built once from the
# Go module proxy into ~/.cache/conveyor (CONVEYOR_OBS_ASSETS=/dir uses prebuilt ones).
observability:
	@bash test/observability/install.sh

# The main job on an embedded default (docs/node.md, "make demo"): a local control plane and a
# real node (kubelet + containerd), the images imported, `helm install` of the chart (the operator
# and the job API as pods), a two-stage pipeline applied with kubectl, a burst of jobs scaling both
# pools 0 → N → 0; the dashboard through `kubectl port-forward`. DEMO_ARGS=--keep keeps it running
# after the summary; SCREENSHOTS=1 writes docs/screenshots mid-run.
# RUNTIME=process: the quick mode — worker processes for kwok's pods, no images, no kubelet.
# RUNTIME=containers: the operator and worker pods from the images under podman, no kubelet.
RUNTIME ?= node
demo: deps controlplane $(if $(filter node,$(RUNTIME)),node images,$(if $(filter containers,$(RUNTIME)),images))
	RUNTIME=$(RUNTIME) node test/e2e/demo.ts $(DEMO_ARGS)

# `helm upgrade` on the real node under load (test/e2e/upgradeDemo.ts): the previous release's chart
# and images (scripts/previous-release-images.sh, built once from the previous-release tree and
# cached beside this release's) installed, the demo's pipeline running, then the new CRD and `helm
# upgrade` in two steps — the operator and job API alone (every worker pod keeps running), then the
# workers' image (each pool rolls with warm shutdown) — and the demo's audit.
upgrade-demo: deps controlplane node images previous-release
	@bash scripts/previous-release-images.sh
	node test/e2e/upgradeDemo.ts

# Benchmarks side by side with BullMQ, the Redis limit, the operator at 1,000 pools and the
# autoscaling comparison with KEDA (bench-autoscale below)
# (about 20 minutes; see bench/README.md). Writes bench/results/<date>.{json,md,svg}.
# BENCH_ARGS passes options, e.g. BENCH_ARGS="--quick --skip-operator".
# It builds first: bin/conveyor.js runs dist/ when present, so a stale build would be measured.
bench: node-deps
	npm run -s build
	@if [ -f test/controlplane/install.sh ]; then bash test/controlplane/install.sh || echo "bench: no test control plane: the operator part will be skipped"; fi
	npm run -s bench -- $(BENCH_ARGS)
	@echo "bench: Redis µs and commands per job with a resource's budget vs without (bench/resources.ts)"
	npm run -s bench:resources
	$(MAKE) -s bench-autoscale

# The autoscaling section: KEDA vs Conveyor's backlog and latency modes on five seeded workloads
# (bench/autoscale.ts, docs/autoscaling-vs-keda.md). Builds KEDA on first use. The default is the
# shortened profile (about 45 min); AUTOSCALE_ARGS="--profile full" runs the issue's full
# workloads (about 4 h on 2 cores). Writes bench/results/<date>-autoscale-<profile>.{json,md} and an SVG per workload.
AUTOSCALE_ARGS ?= --profile short --scale-down-window 60
bench-autoscale: node-deps controlplane keda
	npm run -s bench:autoscale -- $(AUTOSCALE_ARGS)

# Chaos: a three-stage pipeline of real worker processes while a seeded fault injector SIGTERMs,
# SIGKILLs and SIGSTOPs workers and restarts Redis and PostgreSQL; then every job, execution and
# record is audited (docs/chaos.md). Workers of this release and the previous one run side by side
# and upgrade faults replace one by the other (--upgrade). About 12 minutes. CHAOS_ARGS adds or
# overrides options, e.g. CHAOS_ARGS="--seed 7 --seconds 300 --jobs 10000 --keep".
chaos: deps previous-release
	npm run -s chaos -- --jobs 20000 --seconds 600 --groups 6 --flows 400 --upgrade $(CHAOS_ARGS)

# A release: npm pack of @conveyor-dev/queue and @conveyor-dev/conveyor, the chart packaged with
# version and appVersion = VERSION plus the Helm repository's index.yaml, the images tagged VERSION
# (`make images`, when it exists), the CHANGELOG.md section; all in dist/release (docs/install.md,
# "Releases"). VERSION (default: package.json's) is written to package.json and Chart.yaml first —
# the one place the version lives. RELEASE_ARGS passes options, e.g. RELEASE_ARGS="--images false".
release: node-deps
	node scripts/release/main.ts $(if $(VERSION),--version $(VERSION)) $(RELEASE_ARGS)

clean:
	rm -rf dist
