// 2D indexing: out[y][x] = in[x][y] + 1000 * y + x, bounds-checked on both axes
__kernel void index_2d(__global const float *in, __global float *out, int w, int h) {
  int x = get_global_id(0), y = get_global_id(1);
  if (x < w && y < h) out[y * w + x] = in[x * h + y] + 1000.0f * y + x;
}
