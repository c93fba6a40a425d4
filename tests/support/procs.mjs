// Child processes for the Node test suites (tests/ui, tests/clients): started, their
// "listening on URL" line awaited, killed when the suite ends.
import { spawn } from "node:child_process";

export const procs = [];

/** Starts `bin` with `args` (and `env` added to this process's) and resolves with the URL it
 * prints ("listening on http://…"). */
export function start(bin, args, env = {}) {
  return new Promise((resolve, reject) => {
    const p = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });
    procs.push(p);
    let out = "";
    let err = "";
    const timer = setTimeout(() => reject(new Error(`${bin} did not start: ${out}${err}`)), 20000);
    p.stderr.on("data", (d) => (err += d));
    p.stdout.on("data", (d) => {
      out += d;
      const m = out.match(/listening on (http:\/\/\S+)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    p.on("exit", (code) => reject(new Error(`${bin} exited ${code}: ${err}`)));
  });
}
