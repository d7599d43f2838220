// Divergent lanes: nested if/else on data, a data-dependent loop, early return
__kernel void branches(__global const int *in, __global int *out) {
  int i = get_global_id(0);
  int v = in[i];
  if (v < 0) { out[i] = -1; return; }
  int r;
  if (v % 3 == 0) {
    r = v / 3;
    if (r & 1) r = r * 7; else r = r + 11;
  } else if (v % 3 == 1) {
    r = 0;
    for (int k = 0; k < (v & 15); k++) r += k * v;
  } else {
    r = v;
    while (r > 10) r = r / 2 + (r & 1);
  }
  out[i] = r;
}
