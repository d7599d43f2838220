// Tiled transpose through LDS: 16x16 tiles, barrier between the store and the load phase
__kernel void lds_transpose(__global const float *in, __global float *out, int w, int h) {
  __local float tile[16][17];
  int lx = get_local_id(0), ly = get_local_id(1);
  int x = get_group_id(0) * 16 + lx, y = get_group_id(1) * 16 + ly;
  if (x < w && y < h) tile[ly][lx] = in[y * w + x];
  barrier(CLK_LOCAL_MEM_FENCE);
  int tx = get_group_id(1) * 16 + lx, ty = get_group_id(0) * 16 + ly;
  if (tx < h && ty < w) out[ty * h + tx] = tile[lx][ly];
}
