// Cross-lane moves through ds_bpermute_b32 over the whole wave (32 or 64 lanes): an inclusive
// prefix sum (Hillis-Steele, each step reads the lane `d` below) and a reversal of the wave.
__kernel void bpermute_scan(__global const int *in, __global int *scan, __global int *rev) {
  int i = get_global_id(0);
  int lane = (int)__builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
  int w = __AMDGCN_WAVEFRONT_SIZE;
  int v = in[i];
  rev[i] = __builtin_amdgcn_ds_bpermute((w - 1 - lane) << 2, v);
  for (int d = 1; d < w; d <<= 1) {
    int o = __builtin_amdgcn_ds_bpermute((lane - d) << 2, v);
    if (lane >= d) v += o;
  }
  scan[i] = v;
}
