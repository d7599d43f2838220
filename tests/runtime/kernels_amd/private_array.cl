// A private array indexed at run time lives in scratch (the per-lane private segment), at every
// -O level: the runtime has to provide scratch memory for it.
__kernel void private_array(__global const int *in, __global int *out, int n) {
  int a[512];
  int i = get_global_id(0);
  int x = in[i];
  for (int k = 0; k < 512; k++) a[k] = x * k + (k ^ i);
  int s = 0;
  for (int k = 0; k < n; k++) s += a[(k * 37 + i) & 511];
  out[i] = s;
}
