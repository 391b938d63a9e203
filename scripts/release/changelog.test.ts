import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { changelogSection, releaseChangelog } from "./changelog.ts";
import { ROOT, rootVersion } from "./packages.ts";

const LOG = `# Changelog

## [Unreleased]

### Fixed
- a thing

## [0.1.0] - 2026-11-23

### Added
- everything
`;

describe("CHANGELOG.md sections", () => {
  it("turns [Unreleased] into the release's section under a new empty [Unreleased]", () => {
    const out = releaseChangelog(LOG, "0.2.0", "2026-12-01");
    assert.match(
      out,
      /## \[Unreleased\]\n\n## \[0\.2\.0\] - 2026-12-01\n\n### Fixed\n- a thing\n\n## \[0\.1\.0\]/,
    );
    assert.equal(changelogSection(out, "0.2.0"), "### Fixed\n- a thing");
    assert.equal(changelogSection(out, "Unreleased"), "");
  });

  it("keeps a changelog that already has the version's section", () => {
    assert.equal(releaseChangelog(LOG, "0.1.0", "2026-12-01"), LOG);
    assert.equal(changelogSection(LOG, "0.1.0"), "### Added\n- everything");
  });

  it("refuses a release with nothing under [Unreleased], naming the version", () => {
    const empty = releaseChangelog(LOG, "0.2.0", "2026-12-01");
    assert.throws(() => releaseChangelog(empty, "0.3.0", "2026-12-02"), /\[Unreleased\] is empty.*0\.3\.0/);
    assert.throws(() => releaseChangelog("# Changelog\n", "0.3.0", "2026-12-02"), /neither a \[0\.3\.0\]/);
  });

  it("the repository's changelog has a section for the current version", () => {
    const text = readFileSync(join(ROOT, "CHANGELOG.md"), "utf8");
    assert.ok(changelogSection(text, rootVersion()), `CHANGELOG.md lacks [${rootVersion()}]`);
  });
});
