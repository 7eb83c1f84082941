// startMCPServer starts examples/mcp-server (the binary bin) with args,
// its standard error passed on, and resolves with the process and the URL
// it says it listens on.
import { spawn } from 'node:child_process';

export function startMCPServer(bin, args) {
  const proc = spawn(bin, args, { stdio: ['ignore', 'inherit', 'pipe'] });
  return new Promise((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error(`server did not start: ${buf}`)), 30000);
    proc.on('exit', (code) => reject(new Error(`server exited ${code}: ${buf}`)));
    proc.stderr.on('data', (d) => {
      process.stderr.write(d);
      buf += d;
      const m = buf.match(/listening on (\S+) /);
      if (m) {
        clearTimeout(timer);
        resolve({ proc, url: m[1] });
      }
    });
  });
}
