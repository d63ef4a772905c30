#!/usr/bin/env bash
# Fetches the tree-sitter Python grammar pinned below from the npm registry into
# third_party/tree-sitter-python/ (ignored by git) and checks the tarball's SHA-512 against the
# integrity recorded here. ABI 14: newer releases (0.25) do not load in Debian's libtree-sitter.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=0.23.6
SHA512=c8833dcf4a31288c53edb02d3ce860a1597a8135e59a5221b9eee58854f8a013c5fe585aec76b8750052f3602fea130c459a159c5248f0cea62fe4b05a82c3dc
DEST=third_party/tree-sitter-python
STAMP="$DEST/.portkit-version"

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$VERSION $SHA512" ] && [ -f "$DEST/src/parser.c" ]; then
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "setup: fetching tree-sitter-python@$VERSION (npm)"
(cd "$tmp" && npm pack --silent "tree-sitter-python@$VERSION" >/dev/null 2>"$tmp/npm.log") || {
  cat "$tmp/npm.log" >&2; echo "setup: npm pack tree-sitter-python@$VERSION failed" >&2; exit 1; }
tarball="$tmp/tree-sitter-python-$VERSION.tgz"
actual=$(sha512sum "$tarball" | cut -d' ' -f1)
if [ "$actual" != "$SHA512" ]; then
  echo "setup: integrity check failed for tree-sitter-python-$VERSION.tgz" >&2
  echo "  expected sha512 $SHA512" >&2
  echo "  got      sha512 $actual" >&2
  exit 1
fi
rm -rf "$DEST.new"
mkdir -p "$DEST.new"
tar xzf "$tarball" -C "$DEST.new" --strip-components=1 package/src package/LICENSE package/package.json
echo "$VERSION $SHA512" > "$DEST.new/.portkit-version"
rm -rf "$DEST"
mv "$DEST.new" "$DEST"
echo "setup: tree-sitter-python@$VERSION ready in $DEST"
