// Tree reduction in LDS with barriers: one partial sum (and max) per workgroup of 256
__kernel void reduce_lds(__global const float *in, __global float *sums, __global float *maxs, int n) {
  __local float s[256];
  __local float m[256];
  int lid = get_local_id(0);
  int i = get_global_id(0);
  float v = i < n ? in[i] : 0.0f;
  s[lid] = v;
  m[lid] = i < n ? v : -INFINITY;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int k = 128; k > 0; k >>= 1) {
    if (lid < k) {
      s[lid] += s[lid + k];
      m[lid] = fmax(m[lid], m[lid + k]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) {
    sums[get_group_id(0)] = s[0];
    maxs[get_group_id(0)] = m[0];
  }
}
