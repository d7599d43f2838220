// c[i] = a[i] + b[i] (int, wrapping), plus a - b and a * b in two more outputs
__kernel void vadd_i32(__global const int *a, __global const int *b, __global int *sum,
                       __global int *diff, __global int *prod) {
  size_t i = get_global_id(0);
  sum[i] = a[i] + b[i];
  diff[i] = a[i] - b[i];
  prod[i] = a[i] * b[i];
}
