// Builds dist/: one ESM bundle per entry point (shared code split into
// chunks, dependencies left external) plus .d.ts files from tsc. Bundling
// keeps dist/ runnable in Node whatever import extensions the generated code
// uses.
import { build } from "esbuild";
import { execFileSync } from "node:child_process";
import { rmSync } from "node:fs";

rmSync("dist", { recursive: true, force: true });
await build({
  entryPoints: ["src/protocol.ts", "src/client.ts", "src/react.ts"],
  outdir: "dist",
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "neutral",
  target: "es2022",
  sourcemap: true,
  packages: "external",
  logLevel: "warning",
});
execFileSync(
  process.execPath,
  ["node_modules/typescript/bin/tsc", "-p", "tsconfig.json", "--emitDeclarationOnly"],
  { stdio: "inherit" },
);
