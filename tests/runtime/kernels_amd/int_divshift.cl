// Integer division, remainder and shifts, signed and unsigned
__kernel void int_divshift(__global const int *a, __global const int *b, __global int *out) {
  int i = get_global_id(0);
  int x = a[i], y = b[i];
  uint ux = (uint)x, uy = (uint)y;
  __global int *o = out + 10 * i;
  o[0] = x / y;
  o[1] = x % y;
  o[2] = (int)(ux / uy);
  o[3] = (int)(ux % uy);
  o[4] = x << (y & 31);
  o[5] = x >> (y & 31);
  o[6] = (int)(ux >> (uy & 31));
  o[7] = (int)(((long)x * (long)y) >> 32);
  o[8] = min(x, y) ^ max(x, y);
  o[9] = (int)(popcount(ux) + clz(uy));
}
