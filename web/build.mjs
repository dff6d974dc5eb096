// Builds web/dist from web/src: one minified bundle, the stylesheet and the page.
// The output is committed and embedded in the server binary (crates/server/src/http/web.rs).
import { build } from "esbuild";
import { copyFileSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "dist");
mkdirSync(out, { recursive: true });
await build({
  entryPoints: [join(here, "src/main.ts")],
  bundle: true,
  minify: true,
  format: "iife",
  target: ["es2022"],
  outfile: join(out, "app.js"),
  legalComments: "none",
  charset: "utf8",
  logLevel: "warning",
});
await build({
  entryPoints: [join(here, "src/app.css")],
  bundle: true,
  minify: true,
  outfile: join(out, "app.css"),
  logLevel: "warning",
});
copyFileSync(join(here, "src/index.html"), join(out, "index.html"));
