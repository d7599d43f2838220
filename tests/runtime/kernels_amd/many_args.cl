// Many arguments of mixed types (pointers, char/short/int/long/float/double by value)
__kernel void many_args(__global float *out, __global const float *a, __global const int *b,
                        char c8, short s16, int i32, uint u32, long i64, ulong u64, float f32,
                        double f64, __global const float *d, float f2, int i2) {
  int i = get_global_id(0);
  float acc = a[i] * f32 + (float)b[i] * (float)c8 + (float)s16 + (float)i32 + (float)u32;
  acc += (float)(i64 >> 32) + (float)(u64 & 0xffff) + (float)f64 + d[i] * f2 + (float)i2;
  out[i] = acc;
}
