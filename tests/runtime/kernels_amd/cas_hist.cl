// Compare-and-swap retry loops under contention: a histogram of 8 bins where every lane's
// increment is a cmpxchg loop, and a float sum built from cmpxchg on the value's bits.
static inline uint cas(__global uint *p, uint expect, uint desired) {
  __hip_atomic_compare_exchange_strong(p, &expect, desired, __ATOMIC_RELAXED, __ATOMIC_RELAXED,
                                       __AGENT);
  return expect;   // the value found: `expect` is overwritten with it when the swap fails
}

__kernel void cas_hist(__global const uint *in, __global uint *hist, __global float *sum) {
  int i = get_global_id(0);
  uint v = in[i];
  __global uint *bin = hist + (v & 7);
  uint old = *bin, seen;
  while ((seen = cas(bin, old, old + 1u)) != old) old = seen;
  __global uint *bits = (__global uint *)sum;
  uint want = *bits, got;
  while ((got = cas(bits, want, as_uint(as_float(want) + 1.0f))) != want) want = got;
}
