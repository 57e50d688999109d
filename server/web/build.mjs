// Bundles the console into dist/ (committed; the server embeds it with
// include_bytes!, so `cargo build` needs no Node). `node build.mjs --out DIR`
// writes elsewhere: tests/browser/run.sh builds into a temporary folder and
// compares it with dist/ byte for byte.
//
// @agent-harness/client is bundled from its sources in gen/ts/src (no build
// of gen/ts first), and every shared library resolves from this folder, so
// the app and the client share one React and one protobuf runtime.
import { build } from "esbuild";
import { copyFileSync, mkdirSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const at = process.argv.indexOf("--out");
const out = at > 0 ? resolve(process.argv[at + 1]) : join(here, "dist");
const clientSrc = resolve(here, "../../gen/ts/src");
const shared = /^(react|react-dom|scheduler|@bufbuild\/protobuf|@connectrpc\/connect|@connectrpc\/connect-web)(\/.*)?$/;

/** @type {import("esbuild").Plugin} */
const resolveShared = {
  name: "resolve-shared",
  setup(b) {
    b.onResolve({ filter: /^@agent-harness\/client\/(protocol|client|react)$/ }, (args) => ({
      path: join(clientSrc, `${args.path.split("/").pop()}.ts`),
    }));
    b.onResolve({ filter: shared }, async (args) => {
      if (args.pluginData === "shared" || args.resolveDir === here) return undefined;
      const r = await b.resolve(args.path, { kind: args.kind, resolveDir: here, pluginData: "shared" });
      return r.errors.length ? { errors: r.errors } : { path: r.path, sideEffects: r.sideEffects };
    });
  },
};

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
await build({
  entryPoints: { console: join(here, "src/main.tsx") },
  outdir: out,
  bundle: true,
  minify: true,
  format: "iife",
  platform: "browser",
  target: "es2022",
  jsx: "automatic",
  charset: "utf8",
  legalComments: "none",
  define: { "process.env.NODE_ENV": '"production"' },
  plugins: [resolveShared],
  logLevel: "warning",
});
for (const f of ["index.html", "console.css", "favicon.svg"]) copyFileSync(join(here, "static", f), join(out, f));
