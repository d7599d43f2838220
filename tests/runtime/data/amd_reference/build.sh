#!/bin/sh
# Rebuilds the reference code objects in this folder and the expected data the tests compare with.
# Needs clang-16, lld-16 and llvm-16 (scripts/setup.sh installs them) and msgpack for inspect_hsaco.py
# (`.venv/bin/pip install msgpack`). Run from anywhere: sh tests/runtime/data/amd_reference/build.sh
#
# -nogpulib: Debian 12's rocm-device-libs 5.2 has no gfx1100, so ocl_prelude.h maps get_global_id & co.
# onto clang's AMDGPU builtins. clang-16 writes code object v4 by default; vector_add_cov5 is v5.
set -eu
cd "$(dirname "$0")"
PY=${PYTHON:-../../../../.venv/bin/python}
CL="clang-16 -x cl -cl-std=CL2.0 -target amdgcn-amd-amdhsa -mcpu=gfx1100 -O2 -nogpulib -include ocl_prelude.h"
for k in vector_add saxpy reduce_sum int_branch matrix_2d float4_dual; do
  $CL -o "$k.hsaco" "$k.cl"
done
$CL -mcode-object-version=5 -o vector_add_cov5.hsaco vector_add.cl
# CDNA3 (MI300): clang-16 knows gfx940 only (gfx941/gfx942 came with LLVM 17); its kernel
# descriptor has the gfx90a+ fields (ACCUM_OFFSET, TG_SPLIT) the gfx942 loader checks. The gfx942
# code objects come from Triton's own LLVM: scripts/build_triton_kernels.py --targets gfx942.
CDNA3="clang-16 -x cl -cl-std=CL2.0 -target amdgcn-amd-amdhsa -mcpu=gfx940 -O2 -nogpulib -include ocl_prelude.h"
$CDNA3 -o vector_add_gfx940.hsaco vector_add.cl
for f in *.hsaco; do
  "$PY" inspect_hsaco.py "$f" > "${f%.hsaco}.kd_and_metadata.json"
done
