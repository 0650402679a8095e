#!/bin/sh
# The [local] extra (model=local) with a llama.cpp build that runs on any x86-64 machine with AVX2.
#
# llama-cpp-python compiles llama.cpp from source, by default for the building machine's own CPU
# (GGML_NATIVE=ON: AVX-512, AMX, ...). Such a build crashed on another machine, and even on one whose
# CPU lists AMX. So the build is pinned to a fixed baseline: AVX2 with FMA, F16C and BMI2, no AVX-512,
# no AMX. --no-cache-dir: pip's wheel cache keys a built wheel by the source archive, not by these
# flags, so a wheel built earlier with other flags would otherwise be reused silently.
# Run it from the project's root, inside the project's virtual environment.
set -eu
cd "$(dirname "$0")/.."
export CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF"
exec pip install --no-cache-dir "$@" -e '.[local]'
