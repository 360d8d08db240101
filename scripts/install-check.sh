#!/usr/bin/env bash
# Checks that the npm package installs and runs on its own: packs this tree, installs the tarball globally into a
# temporary prefix (production dependencies only, so no TypeScript), then, from a directory outside the checkout,
# runs the installed `uid2-batch --version` and maps the packed samples/customers.csv against the embedded local
# service, checking exit 0 and one output row per input row; then imports the library by its name from a project
# beside the install and generates a token and maps against its own local service.
#
#   scripts/install-check.sh
#
# Run once by .ci/run, not by the test suite (which CI runs on three Node versions). Prints the seconds each step
# took. The temporary directories go, whatever happened. Exit status: 0 when the package installed and ran, else 1.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(mktemp -d -t install-check.XXXXXX)"
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

seconds_since() { echo $(( $(date +%s) - $1 )); }
fail() { echo "install-check: $*" >&2; exit 1; }
# the last lines of a step's log, on a failure
show() { tail -n 30 "$1" >&2; }

mkdir -p "$work/pack" "$work/prefix" "$work/run"

t0=$(date +%s)
# npm pack runs prepack and prepare: a clean build of dist/
(cd "$root" && npm pack --pack-destination "$work/pack" --silent) >"$work/pack.log" 2>&1 \
  || { show "$work/pack.log"; fail "npm pack failed"; }
tarball="$(ls "$work"/pack/uid2-batch-*.tgz 2>/dev/null | head -n 1)"
[ -n "$tarball" ] || { show "$work/pack.log"; fail "npm pack wrote no tarball"; }
echo "install-check: packed $(basename "$tarball") ($(du -k "$tarball" | cut -f1) KiB) in $(seconds_since "$t0") s"

t0=$(date +%s)
# from the temporary directory, so that no project .npmrc or package.json of the checkout applies
(cd "$work/run" && npm install --global --prefix "$work/prefix" --omit=dev --no-audit --no-fund "$tarball") \
  >"$work/install.log" 2>&1 || { show "$work/install.log"; fail "npm install -g of the tarball failed"; }
package="$work/prefix/lib/node_modules/uid2-batch"
cli="$work/prefix/bin/uid2-batch"
[ -x "$cli" ] || fail "the install has no bin/uid2-batch"
[ ! -e "$package/node_modules/typescript" ] || fail "TypeScript was installed: a dev dependency leaked"
echo "install-check: installed globally in $(seconds_since "$t0") s"

cd "$work/run" || fail "no run directory"
expected="$(node -p 'require(process.argv[1]).version' "$package/package.json")"
version="$("$cli" --version 2>"$work/version.err")" || { show "$work/version.err"; fail "uid2-batch --version failed"; }
[ "$version" = "$expected" ] || fail "uid2-batch --version printed '$version', expected '$expected'"
echo "install-check: uid2-batch --version: $version"

t0=$(date +%s)
input="$package/samples/customers.csv"
[ -f "$input" ] || fail "the package has no samples/customers.csv"
"$cli" map "$input" --env local -o out.csv 2>"$work/map.err" || { show "$work/map.err"; fail "uid2-batch map failed"; }
in_rows=$(($(wc -l <"$input") - 1))
out_rows=$(($(wc -l <out.csv) - 1))
[ "$out_rows" -eq "$in_rows" ] || fail "map wrote $out_rows rows for $in_rows input rows"
echo "install-check: map of the packed sample: $out_rows rows, exit 0, in $(seconds_since "$t0") s"

t0=$(date +%s)
# the library, imported by its name from a project beside the install, as a user's program would
mkdir -p "$work/app/node_modules" && ln -s "$package" "$work/app/node_modules/uid2-batch"
cat >"$work/app/check.mjs" <<'JS'
import { IdentityClient, startLocalService, ArgumentError } from 'uid2-batch';
const svc = await startLocalService();
const client = new IdentityClient({ baseUrl: svc.url, apiKey: svc.apiKey, clientSecret: svc.clientSecret });
try {
  const token = await client.generateToken({ email: 'user@example.com' });
  if (token.status !== 'success') throw new Error(`generateToken answered ${token.status}`);
  const map = await client.mapIdentities({ email: ['user@example.com', 'optout@example.com'] });
  if (map.email[0].status !== 'mapped' || map.email[1].status !== 'optout') throw new Error('mapIdentities gave wrong statuses');
  const refused = await client.mapIdentities({}).then(() => false, (e) => e instanceof ArgumentError);
  if (!refused) throw new Error('an empty request was not refused with ArgumentError');
} finally {
  await client.close();
  await svc.stop();
}
JS
(cd "$work/app" && node check.mjs) >"$work/library.log" 2>&1 || { show "$work/library.log"; fail "the library, imported as 'uid2-batch', failed"; }
echo "install-check: the library by its name: token, map and a refused argument, in $(seconds_since "$t0") s"
echo "install-check: passed"
