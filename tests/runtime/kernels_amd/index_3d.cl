// 3D indexing: every work-item records its global, local and group ids and the sizes
__kernel void index_3d(__global uint *out, int nx, int ny) {
  size_t x = get_global_id(0), y = get_global_id(1), z = get_global_id(2);
  size_t i = (z * ny + y) * nx + x;
  out[4 * i + 0] = x | (y << 10) | (z << 20);
  out[4 * i + 1] = get_local_id(0) | (get_local_id(1) << 10) | (get_local_id(2) << 20);
  out[4 * i + 2] = get_group_id(0) | (get_group_id(1) << 10) | (get_group_id(2) << 20);
  out[4 * i + 3] = get_local_size(0) | (get_local_size(1) << 10) | (get_local_size(2) << 20);
}
