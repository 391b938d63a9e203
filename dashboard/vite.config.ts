// The dashboard's build: Preact (automatic JSX runtime), everything bundled into
// dist/dashboard with hashed names under assets/ — no CDN, no external fonts.
import { defineConfig } from "vite";

export default defineConfig({
  root: import.meta.dirname,
  base: "/",
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir: "../dist/dashboard",
    emptyOutDir: true,
    target: "es2022",
    assetsInlineLimit: 0,
    reportCompressedSize: true,
  },
});
