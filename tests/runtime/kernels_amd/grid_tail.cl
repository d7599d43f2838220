// A grid that is not a multiple of the workgroup size: only i < n is written
__kernel void grid_tail(__global const float *in, __global float *out, int n) {
  int i = get_global_id(0);
  if (i < n) out[i] = in[i] * 3.0f - 1.0f;
}
