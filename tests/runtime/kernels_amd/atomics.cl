// Global atomics: one counter hit by every lane, a histogram, min/max, and slot allocation
__kernel void atomics(__global const uint *in, __global uint *counter, __global uint *hist,
                      __global int *minmax, __global uint *slots) {
  int i = get_global_id(0);
  uint v = in[i];
  atomic_add(counter, 1u);
  atomic_add(hist + (v & 15), 1u);
  atomic_min(minmax, (int)v);
  atomic_max(minmax + 1, (int)v);
  uint slot = atomic_inc(counter + 1);
  slots[slot] = v;
}
