// y[i] = alpha * x[i] + y[i] for i < n, with scalar arguments of several types
__kernel void saxpy_n(float alpha, __global const float *x, __global float *y, uint n, int stride) {
  int i = get_global_id(0);
  if (i < n) y[i * stride] = alpha * x[i * stride] + y[i * stride];
}
