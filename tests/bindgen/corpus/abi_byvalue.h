/* Records passed and returned by value (x86-64 SysV: SSE vs INTEGER eightbytes, memory class).
   Implemented in test_abi.py, built with gcc -O2 into libprobe.so. */
struct d2 { double x, y; };
struct i3 { unsigned a, b, c; };
struct mix { float f; int i; double d; };
struct bf { unsigned a : 3; unsigned b : 9; int c : 20; };
struct bfd { unsigned lo : 4; int hi : 12; double d; };
struct __attribute__((aligned(16))) d2a { double x, y; };
struct big { long long v[5]; };
struct fl2 { float a, b; };

double sum_d2(struct d2 s);
unsigned sum_i3(struct i3 s);
double sum_mix(struct mix s);
struct d2 make_d2(double x, double y);
int sum_bf(struct bf s);
struct bf make_bf(unsigned a, unsigned b, int c);
double sum_bfd(struct bfd s);
struct bfd make_bfd(unsigned lo, int hi, double d);
double sum_d2a(struct d2a s);
long long sum_big(struct big s);
struct big make_big(long long first);
struct mix make_mix(float f, int i, double d);
float sum_fl2(struct fl2 s);
struct fl2 make_fl2(float a, float b);
double sum_many(struct d2 a, struct i3 b, struct mix c, int n, struct d2 *out);
int count_args(int n, ...);
extern int probe_counter;
extern struct d2 probe_origin;
int bump(void);
