// Cross-lane instructions that address both halves of a wave64: v_permlane64_b32 (lane i reads
// lane i ^ 32; a no-op in wave32), ds_swizzle_b32 in its bit-mask mode (here: swap neighbours)
// and quad-permute mode (here: reverse each quad), which act within each 32-lane half, and
// ds_append / ds_consume, which add (subtract) a wave's active-lane count to an LDS counter and
// give every active lane the value before.
__kernel void xlane_ops(__global const int *in, __global int *perm, __global int *swz_x,
                        __global int *swz_q, __global int *app, __global int *con,
                        __global int *counts) {
  __local int counter[2];
  int i = get_global_id(0);
  int lid = get_local_id(0);
  if (lid == 0) {
    counter[0] = 0;
    counter[1] = 1000;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  int v = in[i];
  perm[i] = __builtin_amdgcn_permlane64(v);
  swz_x[i] = __builtin_amdgcn_ds_swizzle(v, 0x041F);
  swz_q[i] = __builtin_amdgcn_ds_swizzle(v, 0x801B);
  int a = -1, c = -1;
  if (v & 1)
    a = __builtin_amdgcn_ds_append(&counter[0]);
  if (v & 2)
    c = __builtin_amdgcn_ds_consume(&counter[1]);
  app[i] = a;
  con[i] = c;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid == 0) {
    counts[2 * get_group_id(0)] = counter[0];
    counts[2 * get_group_id(0) + 1] = counter[1];
  }
}
