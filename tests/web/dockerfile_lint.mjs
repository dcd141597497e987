// Lints Dockerfiles with dockerfile-utils (the validator of the Dockerfile language server):
// every diagnostic, warnings included, is printed with its line and fails the run.
//   node tests/web/dockerfile_lint.mjs docker/Dockerfile [...]
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { validate, ValidationSeverity } = require("dockerfile-utils");

let problems = 0;
for (const path of process.argv.slice(2)) {
  const diagnostics = validate(readFileSync(path, "utf8"));
  for (const d of diagnostics) {
    const severity = d.severity === ValidationSeverity.ERROR ? "error" : "warning";
    console.log(`${path}:${d.range.start.line + 1}: ${severity}: ${d.message}`);
  }
  problems += diagnostics.length;
  if (diagnostics.length === 0) console.log(`${path}: no problems`);
}
process.exit(problems === 0 && process.argv.length > 2 ? 0 : 1);
