#!/usr/bin/env bash
# bootstrap.sh -- installs what fusegen needs on a Debian machine (when
# missing) and builds it.  Used by the README's set-up commands and by CI.
#
#   bash tools/bootstrap.sh                 # build into build/
#   BUILD_DIR=build-asan CMAKE_ARGS="-DFUSEGEN_SANITIZE=ON" bash tools/bootstrap.sh
#
# The CUDA toolkit (nvcc, NVRTC, cuda.h) is expected under /usr/local/cuda or
# on PATH; it is not a Debian package here.
set -euo pipefail
cd "$(dirname "$0")/.."

packages="cmake ninja-build pkg-config gcc g++ libyaml-dev liblua5.4-dev libxxhash-dev uthash-dev libjansson-dev libcmocka-dev python3 libprotobuf-c-dev protobuf-c-compiler libonnx-dev libhiredis-dev libssl-dev"
missing=""
for p in $packages; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "bootstrap: installing$missing"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
command -v nvcc >/dev/null 2>&1 || { echo "bootstrap: the CUDA toolkit (nvcc, NVRTC) is required" >&2; exit 1; }

BUILD_DIR=${BUILD_DIR:-build}
# shellcheck disable=SC2086
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} ${CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"
