// Bundles app.tsx into dist/app.js. Bare imports of the shared libraries
// resolve from this directory, so @agent-harness/client (a symlink into
// gen/ts) and the page share one React and one protobuf runtime.
import { build } from "esbuild";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const shared = /^(react|react-dom|scheduler|@bufbuild\/protobuf|@connectrpc\/connect|@connectrpc\/connect-web)(\/.*)?$/;

/** @type {import("esbuild").Plugin} */
const dedupe = {
  name: "dedupe-shared",
  setup(b) {
    b.onResolve({ filter: shared }, async (args) => {
      if (args.pluginData === "dedupe" || args.resolveDir === here) return undefined;
      const r = await b.resolve(args.path, { kind: args.kind, resolveDir: here, pluginData: "dedupe" });
      return r.errors.length ? { errors: r.errors } : { path: r.path, sideEffects: r.sideEffects };
    });
  },
};

await build({
  entryPoints: [`${here}/app.tsx`],
  outfile: `${here}/dist/app.js`,
  bundle: true,
  format: "esm",
  platform: "browser",
  target: "es2022",
  jsx: "automatic",
  sourcemap: true,
  define: { "process.env.NODE_ENV": '"production"' },
  plugins: [dedupe],
  logLevel: "warning",
});
