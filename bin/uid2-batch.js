#!/usr/bin/env node
import('../dist/cli/main.js')
  .then((m) => m.main(process.argv))
  .catch((err) => {
    process.stderr.write(`uid2-batch: failed to start: ${err?.message ? err.message : err}\n`);
    process.exitCode = 1;
  });
