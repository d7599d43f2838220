// Workgroups of 48 threads (a full and a half wave) with a barrier and LDS exchange between waves
__kernel void partial_wave(__global const int *in, __global int *out) {
  __local int buf[48];
  int lid = get_local_id(0);
  buf[lid] = in[get_global_id(0)];
  barrier(CLK_LOCAL_MEM_FENCE);
  out[get_global_id(0)] = buf[47 - lid] * 10 + (int)get_local_size(0);
}
