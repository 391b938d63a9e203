// `npm run gen:openapi`: writes docs/openapi.yaml from the route table (api/openapi.ts) and the
// dashboard's types of the API's replies from the same schemas (api/dashboardTypes.ts).
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { DASHBOARD_TYPES_FILE, dashboardTypes } from "./dashboardTypes.ts";
import { OPENAPI_FILE, openApiYaml } from "./openapi.ts";

writeFileSync(OPENAPI_FILE, openApiYaml());
console.log(`wrote ${fileURLToPath(OPENAPI_FILE)}`);
writeFileSync(DASHBOARD_TYPES_FILE, dashboardTypes());
console.log(`wrote ${fileURLToPath(DASHBOARD_TYPES_FILE)}`);
