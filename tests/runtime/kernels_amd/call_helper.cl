// A call to a function that the linker places before the kernel (a lower address than the
// kernel's entry): s_swappc_b64 into it and s_setpc_b64 back.
__attribute__((noinline)) float poly(float x, int k) {
  float acc = 0.0f;
  for (int j = 0; j <= k; j++) acc = acc * x + (float)(j + 1);
  return acc;
}

__kernel void call_helper(__global const float *in, __global float *out) {
  int i = get_global_id(0);
  out[i] = poly(in[i], i & 3) + 0.5f;
}
