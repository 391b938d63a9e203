// The import rules of docs/architecture.md, checked by `npm run depcheck` (part of `make lint`):
// imports point one way — bin → cli → {api, worker, operator} → records → queue → lib (operator
// skips records) — and no cycles.
// Test harnesses live in test/support; bench/ and chaos/ may use them, nothing in test/ uses
// bench/ or chaos/ (a type-only import of a program's JSON report is allowed).
const PRODUCT = "^(lib|queue|records|worker|operator|cli|api|bin)/";

/** `from` may import nothing in `to` (folders). */
const forbid = (name, from, to, comment, extra = {}) => ({
  name,
  comment,
  severity: "error",
  from: { path: `^(${from})/` },
  to: { path: `^(${to})/`, ...extra },
});

module.exports = {
  forbidden: [
    {
      name: "no-cycles",
      comment: "A cycle ties modules into one knot: split out the shared part (a leaf types file, lib/).",
      severity: "error",
      from: {},
      to: { circular: true },
    },
    forbid(
      "lib-is-the-bottom",
      "lib",
      "queue|records|worker|operator|cli|api|bin|bench|chaos",
      "lib/ imports only node and npm packages.",
    ),
    forbid(
      "queue-imports-only-lib",
      "queue",
      "records|worker|operator|cli|api|bin|bench|chaos",
      "queue/ is shared by every other part: it may use lib/ only.",
    ),
    forbid(
      "records-below-api-and-worker",
      "records",
      "worker|operator|cli|api|bin|bench|chaos",
      "records/ (outbox drain, schema, migrations) is shared by api/ and worker/: it may use queue/ and lib/ only.",
    ),
    forbid(
      "worker-not-up-or-sideways",
      "worker",
      "operator|api|cli|bin|bench|chaos",
      "worker/ may use records/, queue/ and lib/ only.",
    ),
    forbid(
      "operator-not-up-or-sideways",
      "operator",
      "records|worker|api|cli|bin|bench|chaos",
      "operator/ may use queue/ and lib/ only (it never touches the job records).",
    ),
    forbid(
      "api-not-up-or-sideways",
      "api",
      "worker|operator|cli|bin|bench|chaos",
      "api/ may use records/, queue/ and lib/ only.",
    ),
    forbid(
      "cli-not-up",
      "cli",
      "bin|bench|chaos",
      "cli/ wires api/, worker/, operator/, records/, queue/ and lib/ together; nothing imports it but bin/.",
    ),
    forbid(
      "only-bin-imports-cli",
      "lib|queue|records|worker|operator|api|test|bench|chaos",
      "cli",
      "The CLI is the top: tests run it as a process.",
    ),
    forbid(
      "test-not-to-bench-or-chaos",
      "test",
      "bench|chaos",
      "Harnesses shared with bench/ and chaos/ live in test/support (they import it, not the other way).",
      {
        dependencyTypesNot: ["type-only"],
      },
    ),
    forbid(
      "bench-and-chaos-apart",
      "bench",
      "chaos",
      "bench/ and chaos/ share code only through test/support and the product.",
    ),
    forbid(
      "chaos-and-bench-apart",
      "chaos",
      "bench",
      "bench/ and chaos/ share code only through test/support and the product.",
    ),
    {
      name: "product-not-to-test",
      comment:
        "Shipped code may not use test harnesses; a product folder's unit tests and testdata may (test/support).",
      severity: "error",
      from: { path: PRODUCT, pathNot: "(\\.test\\.ts$|/testdata/)" },
      to: { path: "^test/" },
    },
    {
      name: "product-not-to-dev-deps",
      comment: "Shipped code may not import a devDependency (it is not installed in the images).",
      severity: "error",
      from: { path: PRODUCT, pathNot: "\\.test\\.ts$" },
      to: { dependencyTypes: ["npm-dev"], dependencyTypesNot: ["type-only"] },
    },
    {
      name: "no-unresolvable",
      comment: "An import that does not resolve is a typo or a moved file.",
      severity: "error",
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "(^|/)(node_modules|dist)/" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: {
      exportsFields: ["exports"],
      conditionNames: ["import", "require", "node", "default"],
    },
  },
};
