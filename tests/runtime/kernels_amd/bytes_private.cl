// Sub-dword loads/stores (uchar, short) and a dynamically indexed private array
__kernel void bytes_private(__global const uchar *in8, __global const short *in16, __global uchar *out8,
                            __global short *out16, __global int *outp) {
  int i = get_global_id(0);
  uchar c = in8[i];
  short s = in16[i];
  out8[i] = (uchar)(c * 3 + 1);
  out16[i] = (short)(s * -2);
  int priv[16];
  for (int k = 0; k < 16; k++) priv[k] = k * c + s;
  outp[i] = priv[c & 15] + priv[(c >> 4) & 15];
}
