// `npm run gen:config`: writes docs/configuration.md from the settings tables (cli/configuration.ts).
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { CONFIGURATION_FILE, configurationMarkdown } from "./configuration.ts";

writeFileSync(CONFIGURATION_FILE, await configurationMarkdown());
console.log(`wrote ${fileURLToPath(CONFIGURATION_FILE)}`);
