#!/usr/bin/env bash
# Checks the deployment recipes without Kubernetes or a container runtime (issue 45 item 4):
#   - deploy/k8s/*.yaml against the Kubernetes API's schemas and field lists, and against `preface serve`'s
#     options (validate_k8s.mjs; npm installs its two packages into WORK_DIR);
#   - deploy/Dockerfile: its build stage's steps run here on a copy of only what it COPYs (configure, then the
#     build plan of the `preface` target, without compiling); every shared library the built binary needs comes
#     from a package its runtime stage installs (or the base image has); its ENTRYPOINT's options exist.
# Usage: tests/deploy/run.sh PREFACE_BINARY [WORK_DIR]  (WORK_DIR default: <binary dir>/deploy-tests)
# Exit codes: 0 pass, 1 fail, 77 skipped (no node/npm, or the npm registry unreachable), for ctest.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
binary="$(realpath "${1:?usage: run.sh PREFACE_BINARY [WORK_DIR]}")"
work="${2:-$(dirname "$binary")/deploy-tests}"
mkdir -p "$work"
failed=0
fail() { echo "FAIL $*" >&2; failed=1; }

"$binary" serve --help >"$work/serve-help.txt" 2>&1

# The Dockerfile. Package lists sit between "# <stage> packages begin/end" markers.
dockerfile="$root/deploy/Dockerfile"
packages_of() {  # packages_of STAGE: the package names installed between the markers
  sed -n "/# $1 packages begin/,/# $1 packages end/p" "$dockerfile" | tr ' \\' '\n\n' |
    grep -E '^[a-z0-9][a-z0-9.+-]+$' | grep -vE '^(apt-get|update|install|rm|run|debian_frontend)$' || true
}
runtime=" $(packages_of runtime | tr '\n' ' ') "
base=" libc6 libgcc-s1 libstdc++6 zlib1g "  # in debian:12-slim (apt depends on them)
ldconfig -p >"$work/ldconfig.txt"
for lib in $(readelf -d "$binary" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
  case "$lib" in lib[atlu]san.so*|libubsan.so*) continue ;; esac  # a sanitized test build's runtimes
  path=$(awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}' "$work/ldconfig.txt")
  [ -n "$path" ] || { fail "Dockerfile: $lib (needed by the binary) is not installed here"; continue; }
  real=$(realpath "$path")
  pkg=$(dpkg -S "$path" 2>/dev/null || dpkg -S "$real" 2>/dev/null || dpkg -S "/usr$real" 2>/dev/null ||
        dpkg -S "${real#/usr}" 2>/dev/null || true)
  pkg=${pkg%%:*}
  [ -n "$pkg" ] || { fail "Dockerfile: no package owns $path"; continue; }
  case "$runtime$base" in
    *" $pkg "*) ;;
    *) fail "Dockerfile: the runtime stage does not install $pkg ($lib, needed by the binary)" ;;
  esac
done
for opt in $(sed -n 's/^ENTRYPOINT \[\(.*\)\]/\1/p' "$dockerfile" | tr -d '",' | tr ' ' '\n' | grep '^--'); do
  grep -qE -- "(^|[ ,])$opt([ ,=]|$)" "$work/serve-help.txt" || fail "Dockerfile: ENTRYPOINT option $opt is not one of serve's"
done
# The build stage on exactly what it copies: configure, then ask for the build plan of the server.
src="$work/image-src"
rm -rf "$src"
mkdir -p "$src"
for what in $(sed -n 's/^COPY \([^-][^ ]*\) .*/\1/p' "$dockerfile"); do cp -r "$root/$what" "$src/"; done
# The steps, with /build moved under WORK_DIR and the compile replaced by its command list (ninja -t commands).
steps=$(sed -n '/# build steps begin/,/# build steps end/p' "$dockerfile" | sed -n 's/^RUN //p' |
        sed -e "s|/build|$work/image-build|g" -e 's/cmake --build \([^ ]*\) --target preface/ninja -C \1 -t commands preface/')
rm -rf "$work/image-build"
[ "$(echo "$steps" | grep -c .)" -ge 2 ] || fail "Dockerfile: no build steps between the markers"
while read -r step; do
  (cd "$src" && eval "$step") >"$work/image-step.log" 2>&1 || {
    cat "$work/image-step.log" >&2
    fail "Dockerfile: the build stage's step '$step' failed on the files it copies"
    break
  }
done <<<"$steps"
grep -qE -- '-o preface( |$)' "$work/image-step.log" 2>/dev/null ||
  fail "Dockerfile: the build plan does not link the preface binary"

# The Kubernetes manifests.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "skip: node/npm not installed (the Dockerfile checks ran)" >&2
  [ "$failed" = 0 ] && exit 77 || exit 1
fi
cp "$here/package.json" "$here/validate_k8s.mjs" "$work/"
if ! cmp -s "$here/package.json" "$work/.installed-package.json" || [ ! -d "$work/node_modules" ]; then
  if ! (cd "$work" && npm install --no-audit --no-fund --loglevel=error >npm.log 2>&1); then
    cat "$work/npm.log" >&2
    echo "skip: npm install failed (is the npm registry reachable?)" >&2
    [ "$failed" = 0 ] && exit 77 || exit 1
  fi
  cp "$here/package.json" "$work/.installed-package.json"
fi
(cd "$work" && node validate_k8s.mjs "$root/deploy/k8s" "$work/serve-help.txt") || failed=1
[ "$failed" = 0 ] && echo "ok: deploy/Dockerfile and deploy/k8s" || exit 1
