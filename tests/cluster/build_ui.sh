#!/usr/bin/env bash
# Builds the Kubeflow Pipelines UI (KFP_SOURCE/frontend: the React client and its Node server)
# into the cluster cache and prints `kfp-ui DIR` on stdout: DIR/client is what the server serves,
# DIR/server/dist/server.js the server (`node DIR/server/dist/server.js DIR/client PORT`).
#
#   bash tests/cluster/build_ui.sh KFP_SOURCE CACHE
#
# KFP pins Node 24 with engine-strict; Vite 8, its bundler, needs Node 20.19 or newer, and the
# client and server build on Node 20 as they are: the build turns engine-strict off. Two of KFP's
# own build steps are left out: `npm run build` lints and type-checks before it bundles (checks of
# KFP's sources, not steps of the bundle), so this runs Tailwind and `vite build` directly. The
# devDependency `fs@0.0.1-security` (npm's empty placeholder for a name that shadows Node's
# module; nothing imports it) is not on every npm registry: the build's copy of package.json and
# package-lock.json leaves it out. The result is rebuilt only when Node's version, KFP's lock files
# or this script change; it lives in CACHE/kfp-ui/VERSION-KEY/.
set -euo pipefail

source=$1 cache=$2
version=$(cat "$source/VERSION")
node_version=$(node --version 2>/dev/null || true)
if [ -z "$node_version" ]; then
  echo "build_ui.sh: no node on PATH; install Node.js 20.19 or newer (.ci/system-packages.sh)" >&2
  exit 1
fi
IFS=. read -r major minor _ <<<"${node_version#v}"
if [ "$major" -lt 20 ] || { [ "$major" -eq 20 ] && [ "$minor" -lt 19 ]; }; then
  echo "build_ui.sh: Node.js $node_version is too old for KFP's UI (Vite 8 needs 20.19+)" >&2
  exit 1
fi
key=$( { echo "$node_version"; cat "$0" "$source/frontend/package-lock.json" \
         "$source/frontend/server/package-lock.json"; } | sha256sum | cut -c1-16)
target=$cache/kfp-ui/$version-$key
if [ ! -f "$target/server/dist/server.js" ]; then
  echo "build.sh: building kfp-ui $version (cache: $target)" >&2
  started=$(date +%s)
  mkdir -p "$cache/kfp-ui"
  staging=$(mktemp -d "$cache/kfp-ui/.building.XXXXXX")
  trap 'rm -rf "$staging"' EXIT
  cp -r "$source/frontend" "$staging/frontend"
  chmod -R u+w "$staging/frontend"
  (
    cd "$staging/frontend"
    node -e '
      const fs = require("fs");
      const pkg = JSON.parse(fs.readFileSync("package.json"));
      delete pkg.devDependencies.fs;
      fs.writeFileSync("package.json", JSON.stringify(pkg, null, 2));
      const lock = JSON.parse(fs.readFileSync("package-lock.json"));
      delete lock.packages[""].devDependencies.fs;
      delete lock.packages["node_modules/fs"];
      fs.writeFileSync("package-lock.json", JSON.stringify(lock, null, 2));'
    export npm_config_engine_strict=false npm_config_audit=false npm_config_fund=false
    # The root's postinstall installs the server's and the mock backend's packages: the server's
    # are installed below, the mock backend (KFP's UI development stand-in) is not needed.
    npm ci --ignore-scripts --loglevel=error >&2
    npx tailwindcss build -i src/tailwind.css -o src/build/tailwind.output.css >&2 2>/dev/null
    npx vite build --logLevel error >&2
    cd server
    npm ci --loglevel=error >&2
    npm run build --silent >&2
  )
  mkdir -p "$staging/out/server/src/third_party/mlmd"
  mv "$staging/frontend/build" "$staging/out/client"
  for part in dist node_modules package.json; do
    mv "$staging/frontend/server/$part" "$staging/out/server/$part"
  done
  # The server's MLMD validator reads the generated protos as CommonJS (KFP's Dockerfile).
  cp -r "$staging/frontend/src/third_party/mlmd/generated" "$staging/out/server/src/third_party/mlmd/"
  printf '{"type":"commonjs"}\n' >"$staging/out/server/src/third_party/mlmd/generated/package.json"
  rm -rf "$target"
  mv "$staging/out" "$target"
  rm -rf "$staging"
  trap - EXIT
  seconds=$(( $(date +%s) - started ))
  printf 'build.sh: built kfp-ui in %d min %02d s\n' $((seconds / 60)) $((seconds % 60)) >&2
fi
echo "kfp-ui $target"
