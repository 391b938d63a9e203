// `npm run gen:openapi`: writes docs/openapi.yaml from the route table (api/openapi.ts).
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { OPENAPI_FILE, openApiYaml } from "./openapi.ts";

writeFileSync(OPENAPI_FILE, openApiYaml());
console.log(`wrote ${fileURLToPath(OPENAPI_FILE)}`);
