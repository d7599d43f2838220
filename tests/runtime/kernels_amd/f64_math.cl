// Double precision: add, mul, fma, div, sqrt, conversions
__kernel void f64_math(__global const double *a, __global const double *b, __global double *out) {
  int i = get_global_id(0);
  double x = a[i], y = b[i];
  out[5 * i + 0] = x + y;
  out[5 * i + 1] = x * y;
  out[5 * i + 2] = fma(x, y, 1.0);
  out[5 * i + 3] = x / y;
  out[5 * i + 4] = sqrt(fabs(x)) + (double)(float)y;
}
