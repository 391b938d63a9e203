# Conveyor — every entry point a person or CI uses. Node 24 comes from node_modules (the `node`
# npm package), never from the machine, so `npm run`/`npx` are the only way scripts start.
SHELL := /bin/bash
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)

.PHONY: all deps system-deps node-deps build typecheck test test-unit controlplane demo bench chaos lint clean

all: build

system-deps:
	@bash scripts/system-deps.sh

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

node-deps: node_modules/.installed

deps: system-deps node-deps

build: deps
	npm run build

typecheck: node-deps
	npm run typecheck

# The whole suite against real Redis, PostgreSQL and a real Kubernetes control plane.
test: deps typecheck controlplane
	npm test

controlplane:
	@bash test/controlplane/install.sh

clean:
	rm -rf dist
