// Float arithmetic: mul, add, fma, min, max, div, sqrt and friends
__kernel void float_math(__global const float *a, __global const float *b, __global const float *c,
                         __global float *out) {
  int i = get_global_id(0);
  float x = a[i], y = b[i], z = c[i];
  __global float *o = out + 10 * i;
  o[0] = x * y;
  o[1] = x + y;
  o[2] = fma(x, y, z);
  o[3] = fmin(x, y);
  o[4] = fmax(x, y);
  o[5] = x / y;
  o[6] = sqrt(fabs(x));
  o[7] = floor(x) + ceil(y);
  o[8] = x - y * z;
  o[9] = (float)(int)(x * 100.0f);
}
