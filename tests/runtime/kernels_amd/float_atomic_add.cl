// Float atomic add at device scope: clang-16 expands it into a global_atomic_cmpswap_b32 retry
// loop, which every lane runs against one address here (the worst contention).
__kernel void float_atomic_add(__global float *sum, __global const float *v) {
  __hip_atomic_fetch_add(sum, v[get_global_id(0)], __ATOMIC_RELAXED, 4);
}
