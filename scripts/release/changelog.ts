// CHANGELOG.md in the Keep a Changelog shape: `## [Unreleased]` collects changes as they land;
// a release renames it to `## [x.y.z] - date` and opens a new empty Unreleased above it.

const HEADING = /^## \[([^\]]+)\](.*)$/;

interface Section {
  name: string;
  /** Line index of the heading. */
  start: number;
  /** Line index after the section's last line. */
  end: number;
}

function sections(lines: string[]): Section[] {
  const found: Section[] = [];
  lines.forEach((line, i) => {
    const m = HEADING.exec(line);
    if (!m) return;
    const last = found.at(-1);
    if (last) last.end = i;
    found.push({ name: m[1]!, start: i, end: lines.length });
  });
  return found;
}

/** The text under `## [version]` (without its heading), or null when there is no such section. */
export function changelogSection(text: string, version: string): string | null {
  const lines = text.split("\n");
  const s = sections(lines).find((x) => x.name === version);
  return s
    ? lines
        .slice(s.start + 1, s.end)
        .join("\n")
        .trim()
    : null;
}

/**
 * The changelog with a section for `version`: kept as it is when the section exists, else made
 * from [Unreleased] (which must say something) with `date` (YYYY-MM-DD), under a new empty
 * [Unreleased].
 */
export function releaseChangelog(text: string, version: string, date: string): string {
  if (changelogSection(text, version) !== null) return text;
  const lines = text.split("\n");
  const unreleased = sections(lines).find((x) => x.name.toLowerCase() === "unreleased");
  if (!unreleased) throw new Error(`CHANGELOG.md has neither a [${version}] nor an [Unreleased] section`);
  if (
    lines
      .slice(unreleased.start + 1, unreleased.end)
      .join("\n")
      .trim() === ""
  )
    throw new Error(`CHANGELOG.md: [Unreleased] is empty; write what changed in ${version} there first`);
  lines.splice(unreleased.start, 1, "## [Unreleased]", "", `## [${version}] - ${date}`);
  return lines.join("\n");
}
