#!/usr/bin/env node
// the young generation is bounded before the CLI's modules are loaded: loading them is enough to grow it
import('../dist/pipeline/run/young-generation.js')
  .then((y) => {
    y.boundYoungGeneration();
    return import('../dist/cli/main.js');
  })
  .then((m) => m.main(process.argv))
  .catch((err) => {
    process.stderr.write(`uid2-batch: failed to start: ${err?.message ? err.message : err}\n`);
    process.exitCode = 1;
  });
