#!/usr/bin/env bash
# Installs onnxruntime-node (CPU binaries ship inside the package) into .cache/onnxruntime, for
# scripts/ort_run.js; Node.js and npm come from Debian when the machine has none. Idempotent.
# Prints the install folder. Usage: scripts/install_onnxruntime.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# 1.20.1 loads under Node 18 (Debian 12) and Node 20 alike (N-API 3), and reads ONNX IR 3 to 10.
ORT_VERSION=1.20.1
DEST="$PWD/.cache/onnxruntime"

# A machine may already carry Node.js with its own npm (NodeSource's nodejs conflicts with
# Debian's npm package), so install Debian's packages only where a command is missing.
if ! command -v node > /dev/null || ! command -v npm > /dev/null; then
  scripts/install_packages.sh install_onnxruntime nodejs npm
fi

installed_version() {
  node -p "require('$DEST/node_modules/onnxruntime-node/package.json').version" 2> /dev/null || true
}

if [ "$(installed_version)" != "$ORT_VERSION" ] \
  || ! node -e "require('$DEST/node_modules/onnxruntime-node')" > /dev/null 2>&1; then
  registry="$(npm config get registry 2> /dev/null || echo https://registry.npmjs.org/)"
  if ! npm view "onnxruntime-node@$ORT_VERSION" version --fetch-timeout=20000 \
    --fetch-retries=1 > /dev/null 2>&1; then
    echo "install_onnxruntime: cannot reach the npm registry ($registry) to fetch onnxruntime-node@$ORT_VERSION" >&2
    exit 1
  fi
  mkdir -p "$DEST"
  if [ ! -f "$DEST/package.json" ]; then
    echo '{"name": "igb-onnxruntime", "private": true}' > "$DEST/package.json"
  fi
  # --ignore-scripts: the package's install script only fetches optional GPU binaries.
  if ! npm install --prefix "$DEST" --ignore-scripts --no-audit --no-fund --save-exact \
    --loglevel=error "onnxruntime-node@$ORT_VERSION" > "$DEST/npm-install.log" 2>&1; then
    echo "install_onnxruntime: npm install of onnxruntime-node@$ORT_VERSION failed (see $DEST/npm-install.log)" >&2
    exit 1
  fi
  if ! node -e "require('$DEST/node_modules/onnxruntime-node')" > /dev/null 2>&1; then
    echo "install_onnxruntime: onnxruntime-node@$ORT_VERSION installed but does not load under node $(node --version)" >&2
    exit 1
  fi
fi
echo "$DEST"
