// The `prepare` script: npm runs it after `npm install ./clients/typescript` (which links
// this folder into a project without installing its dependencies or building it),
// after `npm ci` here, and before `npm pack`. It installs this folder's locked
// dependencies when they are missing, then builds dist/, so that the link imports.

import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";

const here = new URL("..", import.meta.url);
// The npm that runs this script (npm_execpath), else the one on PATH.
const npm = process.env.npm_execpath
  ? { file: process.execPath, args: [process.env.npm_execpath] }
  : { file: "npm", args: [] };
const env = { ...process.env };
delete env.npm_config_global; // `npm install -g <folder>`: this folder's deps stay local
const run = (...args) =>
  execFileSync(npm.file, [...npm.args, ...args], {
    cwd: here,
    env,
    stdio: "inherit",
    shell: npm.args.length === 0 && process.platform === "win32",
  });

const installed = [
  "node_modules/.bin/tsc",
  "node_modules/openapi-fetch/package.json",
  "node_modules/standardwebhooks/package.json",
  "node_modules/@opentelemetry/api/package.json",
].every((path) => existsSync(new URL(path, here)));
if (!installed) {
  // --ignore-scripts: this very script is one of them
  run("ci", "--ignore-scripts", "--include=dev", "--no-audit", "--no-fund");
}
run("run", "build");
