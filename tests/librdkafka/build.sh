#!/usr/bin/env bash
# Builds librdkafka and its test runner (tests/test-runner) from the source the
# rdkafka-sys crate vendors, once per version, under ~/.cache/es/librdkafka/<version>.
#
#   build.sh <librdkafka source dir>    prints the build directory
#
# The build runs in a temporary directory beside the cache entry and is renamed
# into place when complete, so an interrupted build is never taken for a finished
# one. Only what the allowlisted tests need is configured: plain TCP (no SSL, SASL,
# GSSAPI or HTTP client), zlib (zlib1g-dev) and the bundled LZ4 and Snappy; zstd is
# left out (libzstd-dev is not a machine requirement).
set -euo pipefail

src="${1:?usage: build.sh <librdkafka source dir>}"
[ -f "$src/src/rdkafka.h" ] && [ -f "$src/tests/test.c" ] || {
  echo "build.sh: $src is not a librdkafka source tree with tests/" >&2
  exit 1
}
# RD_KAFKA_VERSION 0x020c01ff -> 2.12.1
hex="$(sed -n 's/^#define RD_KAFKA_VERSION *0x\([0-9a-fA-F]*\).*/\1/p' "$src/src/rdkafka.h")"
version="$((16#${hex:0:2})).$((16#${hex:2:2})).$((16#${hex:4:2}))"

cache="${ES_CACHE_DIR:-$HOME/.cache/es}/librdkafka"
dest="$cache/$version"
done_mark="$dest/.es-build-complete"
if [ -f "$done_mark" ] && [ -x "$dest/tests/test-runner" ]; then
  echo "$dest"
  exit 0
fi

mkdir -p "$cache"
work="$(mktemp -d "$cache/.$version.building.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cp -R "$src/." "$work/"
chmod -R u+w "$work"
cd "$work"
jobs="${ES_LIBRDKAFKA_JOBS:-$(nproc 2>/dev/null || echo 2)}"
{
  ./configure --no-download --disable-ssl --disable-gssapi --disable-curl --disable-zstd \
    --enable-zlib --disable-lz4-ext
  make -j"$jobs" libs
  make -j"$jobs" -C tests test-runner
} >"$work/es-build.log" 2>&1 || {
  echo "build.sh: building librdkafka $version failed; the end of its log:" >&2
  tail -n 60 "$work/es-build.log" >&2
  exit 1
}
touch "$work/.es-build-complete"
# An incomplete entry (from an older, interrupted scheme) makes way.
rm -rf "$dest"
mv -T "$work" "$dest"
trap - EXIT
echo "$dest"
