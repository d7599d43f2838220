/* T8: aligned(8) member, aligned(16) typedef, aligned(32) struct (above what ctypes < 3.13 expresses). */
// probe: struct t8, struct t8_s32, struct t8_holder
// gcc: t8 size 32, m@8 t@16 after@20; t8_s32 size 32
typedef int t8_a16 __attribute__((aligned(16)));
struct t8 {
	char c;
	int m __attribute__((aligned(8)));
	t8_a16 t;
	int after;
};
struct __attribute__((aligned(32))) t8_s32 {
	int x;
};
struct t8_holder {
	char c;
	struct t8_s32 s;
	int tail;
};
