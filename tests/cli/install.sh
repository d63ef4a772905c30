#!/usr/bin/env bash
# cmake --install into a temporary prefix, then the installed portkit on its own: the prefix is
# moved to another folder (nothing may depend on where it was installed), PORTKIT_DATA_DIR,
# PORTKIT_PYTHON_DIR and PYTHONPATH are unset, and, where mount namespaces are available
# (`unshare -m`, root), the source and build trees are hidden behind empty folders. Checks:
#   - bin/portkit --version is the companion's version;
#   - bin/portkit analyse on examples/cifar_cuda writes the same tables as the build's binary;
#   - analyse -m dynamic_shape copies the installed companion's detector;
#   - PYTHONPATH=PREFIX/share/portkit/python: `python3 -m portkit.export_ops --help` works and
#     `import portkit` comes from the prefix with the same version;
#   - with the installed data removed, the installed binary fails (it never falls back to the
#     source tree).
# usage: install.sh BUILD_DIR   (run from the repository root)
set -euo pipefail
BUILD=$(cd "${1:?usage: install.sh BUILD_DIR}" && pwd)
SRC=$(pwd)
PY=/usr/bin/python3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$BUILD" --prefix "$T/prefix" >"$T/install.log" || { cat "$T/install.log"; fail "cmake --install"; }
for f in bin/portkit share/portkit/data/targets/npu/target.json share/portkit/python/portkit/__init__.py \
         share/portkit/python/portkit/VERSION share/portkit/python/pyproject.toml \
         share/portkit/python/portkit/dynamic_shape/hook.py share/doc/portkit/LICENSE; do
  [ -e "$T/prefix/$f" ] || fail "not installed: $f"
done
if find "$T/prefix" -name __pycache__ -o -name '*.egg-info' | grep -q .; then fail "build leftovers installed"; fi
mv "$T/prefix" "$T/moved"
P=$T/moved
VERSION=$(cat python/portkit/VERSION)

# Inputs and the build binary's reference output, prepared while the source tree is visible.
cp -r examples/cifar_cuda "$T/cifar_cuda"
cp -r tests/python/fixtures/dyn_project "$T/dyn_project"
"$BUILD/portkit" analyse -i "$T/cifar_cuda" -o "$T/out_build" -v 2.1.0 >/dev/null 2>&1 || true

cat >"$T/checks.sh" <<'EOF'
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
unset PORTKIT_DATA_DIR PORTKIT_PYTHON_DIR PYTHONPATH
cd "$T"
[ ! -e "$SRC/data" ] || [ "${HIDDEN:-0}" = 0 ] || fail "source tree still visible"
v=$("$P/bin/portkit" --version) || fail "portkit --version"
case "$v" in *"$VERSION"*) ;; *) fail "portkit --version says '$v', expected $VERSION" ;; esac

rc=0; "$P/bin/portkit" analyse -i "$T/cifar_cuda" -o "$T/out_inst" -v 2.1.0 >"$T/analyse.log" 2>&1 || rc=$?
[ "$rc" -le 1 ] || { cat "$T/analyse.log"; fail "installed portkit analyse exited $rc"; }
n=0
for f in "$T"/out_build/cifar_cuda_analysis/*.csv; do
  cmp -s "$f" "$T/out_inst/cifar_cuda_analysis/$(basename "$f")" || fail "$(basename "$f") differs from the build's"
  n=$((n + 1))
done
[ "$n" -ge 3 ] || fail "analyse wrote only $n tables"

rc=0; "$P/bin/portkit" analyse -i "$T/dyn_project" -o "$T/dyn_out" -m dynamic_shape >"$T/dyn.log" 2>&1 || rc=$?
[ "$rc" -le 1 ] || { cat "$T/dyn.log"; fail "analyse -m dynamic_shape exited $rc"; }
cmp -s "$P/share/portkit/python/portkit/dynamic_shape/hook.py" "$T/dyn_out/dyn_project_analysis/msft_dynamic_analysis/hook.py" \
  || fail "the dynamic-shape detector was not copied from the installed companion"

export PYTHONPATH="$P/share/portkit/python"
"$PY" -m portkit.export_ops --help >"$T/export.txt" 2>&1 || { cat "$T/export.txt"; fail "python3 -m portkit.export_ops --help"; }
grep -q -- "--model" "$T/export.txt" || fail "export_ops --help does not describe --model"
got=$("$PY" -c 'import portkit, sys; sys.stdout.write(portkit.__version__ + " " + portkit.__file__)')
[ "$got" = "$VERSION $P/share/portkit/python/portkit/__init__.py" ] || fail "import portkit gave '$got'"
unset PYTHONPATH

mv "$P/share/portkit/data" "$P/share/portkit/data.away"
rc=0; "$P/bin/portkit" analyse -i "$T/cifar_cuda" -o "$T/out_nodata" -v 2.1.0 >"$T/nodata.log" 2>&1 || rc=$?
mv "$P/share/portkit/data.away" "$P/share/portkit/data"
[ "$rc" -ge 2 ] || fail "without its installed data the installed portkit still ran (rc $rc): it read another data folder"
grep -q "share/portkit/data" "$T/nodata.log" || { cat "$T/nodata.log"; fail "the missing-data error does not name share/portkit/data"; }
echo "installed portkit $VERSION works on its own"
EOF

export T P SRC VERSION PY
if unshare -m true 2>/dev/null; then
  # Hide the source tree (and the build tree, if it is elsewhere) for the checks.
  hide="mount -t tmpfs portkit-hidden '$SRC'"
  case "$BUILD/" in "$SRC"/*) ;; *) hide="$hide && mount -t tmpfs portkit-hidden '$BUILD'" ;; esac
  HIDDEN=1 unshare -m bash -c "$hide && bash '$T/checks.sh'"
  echo "(source and build trees hidden)"
else
  HIDDEN=0 bash "$T/checks.sh"
  echo "(no mount namespace here: source tree left in place; the no-fallback check still applies)"
fi
