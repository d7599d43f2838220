/* T7: enums with a negative value, a value needing unsigned int and one needing 8 bytes. */
// probe: struct t7
// probe-const: T7_NEG T7_POS T7_BIG T7_HUGE T7_MIXED_LO T7_MIXED_HI
// gcc: size 24
enum t7_neg { T7_NEG = -5, T7_POS = 1 };
enum t7_u32 { T7_BIG = 0x80000000u };
enum t7_u64 { T7_HUGE = 0x100000000 };
enum t7_mixed { T7_MIXED_LO = -1, T7_MIXED_HI = 0x80000000u };
struct t7 {
	enum t7_neg a;
	enum t7_u32 b;
	enum t7_u64 c;
	int after;
};
struct t7m {
	char c;
	enum t7_mixed m;
};
// probe: struct t7m
