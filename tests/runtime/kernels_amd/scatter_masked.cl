// Scattered stores under a partial EXEC, unaligned dword loads, and waves that meet at two
// different barriers (one per side of a divergent branch) and exchange data through LDS
typedef int __attribute__((aligned(1))) unaligned_int;
__kernel void scatter_masked(__global const int *in, __global int *out, __global const uchar *bytes,
                             __global int *out2, __global int *out3, int n) {
  __local int s[128];
  int i = get_global_id(0);
  int lid = get_local_id(0);
  if (i % 3 != 0 && i < n) out[(i * 7) % n] = in[i] + 1;
  if (i < n) out2[i] = *(__global const unaligned_int *)(bytes + i + 1);
  if (lid < 64) {
    s[lid] = i * 2;
    barrier(CLK_LOCAL_MEM_FENCE);
    out3[i] = s[127 - lid];
  } else {
    s[lid] = i * 3;
    barrier(CLK_LOCAL_MEM_FENCE);
    out3[i] = s[127 - lid] + 1;
  }
}
