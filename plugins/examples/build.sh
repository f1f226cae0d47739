#!/usr/bin/env bash
# Builds the example plugins written in Python and JavaScript: the record
# validators OUTDIR/example_python.wasm and OUTDIR/example_js.wasm, and the
# token-allowlist authenticator OUTDIR/example_python_auth.wasm.
#
# The tools are installed once into a cache directory, pinned:
#   ${ES_PLUGIN_TOOLS:-$HOME/.cache/es/plugin-tools}/python  a venv with componentize-py
#   ${ES_PLUGIN_TOOLS:-$HOME/.cache/es/plugin-tools}/js      `npm ci` of js/package-lock.json
# A component is rebuilt only when the content of its sources, the WIT or this
# script changed since it was built (a digest is kept beside it). Needs python3
# (with venv), node and npm on PATH; the first run installs about 450 MB from PyPI
# and the npm registry.
#
# Usage: plugins/examples/build.sh OUTDIR
# Exit status: 0 built or up to date; 3 the tools are missing or cannot be
# installed (no python3/node/npm, or the registries cannot be reached); other
# non-zero: a build failed.
set -euo pipefail

COMPONENTIZE_PY_VERSION=0.25.1
# Bounds for each step, so a hung download or build never blocks CI forever.
INSTALL_TIMEOUT_S=900
BUILD_TIMEOUT_S=600

if [ "$#" -ne 1 ]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
here="$(cd "$(dirname "$0")" && pwd)"
wit="$(cd "$here/../../wit" && pwd)"
mkdir -p "$1"
out="$(cd "$1" && pwd)"
tools="${ES_PLUGIN_TOOLS:-$HOME/.cache/es/plugin-tools}"
mkdir -p "$tools"

# The tools cannot be had: exit 3, so callers can tell this from a broken build.
unavailable() {
  echo "build.sh: $1" >&2
  exit 3
}

need() {
  command -v "$1" >/dev/null 2>&1 || unavailable "'$1' not found on PATH; $2"
}
need python3 "install Python 3.10+ with venv (Debian: apt-get install python3 python3-venv)"
need node "install Node.js 18+ (Debian: apt-get install nodejs npm)"
need npm "install npm (Debian: apt-get install npm)"

# Prints a digest of the given files (in order), for the input stamps below.
digest() {
  cat "$@" | sha256sum | cut -d' ' -f1
}

# True when component $1 is missing or was built from other inputs than digest $2.
# A content digest rather than timestamps, so a fresh clone (new mtimes) does not
# rebuild, and every rebuild costs the broker a recompile of the new bytes.
stale() {
  [ -e "$1" ] && [ "$(cat "$1.inputs" 2>/dev/null || true)" = "$2" ] && return 1
  return 0
}

install_python() {
  local venv="$tools/python"
  local want="componentize-py $COMPONENTIZE_PY_VERSION"
  if [ "$("$venv/bin/componentize-py" --version 2>/dev/null || true)" = "$want" ]; then
    return
  fi
  echo "build.sh: installing $want into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv" || unavailable "python3 -m venv failed (Debian: apt-get install python3-venv)"
  timeout "$INSTALL_TIMEOUT_S" "$venv/bin/pip" install --quiet --disable-pip-version-check \
    "componentize-py==$COMPONENTIZE_PY_VERSION" ||
    unavailable "pip could not install componentize-py==$COMPONENTIZE_PY_VERSION (is PyPI reachable?)"
  [ "$("$venv/bin/componentize-py" --version)" = "$want" ]
}

install_js() {
  local prefix="$tools/js"
  # The installed tree matches the committed lock file exactly, or is redone.
  if cmp -s "$here/js/package-lock.json" "$prefix/package-lock.json" &&
    [ -x "$prefix/node_modules/.bin/componentize-js" ]; then
    return
  fi
  echo "build.sh: installing componentize-js (js/package-lock.json) into $prefix"
  rm -rf "$prefix"
  mkdir -p "$prefix"
  cp "$here/js/package.json" "$here/js/package-lock.json" "$prefix/"
  # --ignore-scripts: nothing in the tree needs an install script, and none may
  # download anything from outside the registry. package.json also lists
  # @bytecodealliance/preview2-shim: componentize-js imports it without declaring
  # it, and `npm ci` does not otherwise put it where node finds it.
  (cd "$prefix" && timeout "$INSTALL_TIMEOUT_S" npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) ||
    unavailable "npm ci could not install js/package-lock.json (is the npm registry reachable?)"
}

# componentize-py generates the bindings of the world itself (the `wit_world`
# package the app imports) and snapshots the initialized interpreter into the
# component. --stub-wasi replaces every WASI import with a trapping stub, so the
# component imports only es:plugin/host (see docs/plugins.md, "Writing a plugin in
# Python").
build_python() {
  local target="$out/example_python.wasm"
  local inputs
  inputs="$(digest "$here/python/require_fields.py" "$wit"/*.wit "$here/build.sh")"
  if ! stale "$target" "$inputs"; then
    echo "build.sh: $target is up to date"
    return
  fi
  install_python
  # A scratch copy of the source, so no __pycache__ lands in the tree; it lives in
  # OUTDIR, so a failed build leaves nothing behind elsewhere.
  local work="$out/.python-build"
  rm -rf "$work"
  mkdir -p "$work"
  cp "$here/python/require_fields.py" "$work/"
  (cd "$work" && timeout "$BUILD_TIMEOUT_S" "$tools/python/bin/componentize-py" --quiet \
    -d "$wit" -w record-validator componentize --stub-wasi -p . require_fields -o "$target.tmp")
  rm -rf "$work"
  mv "$target.tmp" "$target"
  echo "$inputs" >"$target.inputs"
  echo "build.sh: built $target"
}

# componentize-js embeds StarlingMonkey (SpiderMonkey) and snapshots the module
# with wizer. Disabling `stdio` drops the filesystem and stdin/stdout imports
# (wasi:cli/stderr stays, which the sandbox allows) and `http`/`fetch-event` drop
# wasi:http, so the component imports only what the es sandbox links.
build_js() {
  local target="$out/example_js.wasm"
  local inputs
  inputs="$(digest "$here/js/require-fields.js" "$here/js/package-lock.json" "$wit"/*.wit "$here/build.sh")"
  if ! stale "$target" "$inputs"; then
    echo "build.sh: $target is up to date"
    return
  fi
  install_js
  timeout "$BUILD_TIMEOUT_S" "$tools/js/node_modules/.bin/componentize-js" \
    "$here/js/require-fields.js" --wit "$wit" --world-name record-validator \
    --disable http fetch-event stdio --out "$target.tmp" >/dev/null
  mv "$target.tmp" "$target"
  echo "$inputs" >"$target.inputs"
  echo "build.sh: built $target"
}

# The token-allowlist authenticator (python-auth/): the `authenticator` world,
# whose exported `auth` interface has a resource, so componentize-py wants its
# class in a module named `auth` (python-auth/auth.py) beside the app module.
build_python_auth() {
  local target="$out/example_python_auth.wasm"
  local inputs
  inputs="$(digest "$here"/python-auth/*.py "$wit"/*.wit "$here/build.sh")"
  if ! stale "$target" "$inputs"; then
    echo "build.sh: $target is up to date"
    return
  fi
  install_python
  local work="$out/.python-auth-build"
  rm -rf "$work"
  mkdir -p "$work"
  cp "$here"/python-auth/*.py "$work/"
  (cd "$work" && timeout "$BUILD_TIMEOUT_S" "$tools/python/bin/componentize-py" --quiet \
    -d "$wit" -w authenticator componentize --stub-wasi -p . token_allowlist -o "$target.tmp")
  rm -rf "$work"
  mv "$target.tmp" "$target"
  echo "$inputs" >"$target.inputs"
  echo "build.sh: built $target"
}

build_python
build_js
build_python_auth
