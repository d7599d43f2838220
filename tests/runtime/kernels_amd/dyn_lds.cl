// A workgroup sum in LDS the launch provides (a __local pointer argument: dynamic LDS).
__kernel void dyn_lds(__global const float *in, __global float *out, __local float *s) {
  int lid = get_local_id(0);
  s[lid] = in[get_global_id(0)];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int k = get_local_size(0) / 2; k > 0; k >>= 1) {
    if (lid < k) s[lid] += s[lid + k];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) out[get_group_id(0)] = s[0];
}
