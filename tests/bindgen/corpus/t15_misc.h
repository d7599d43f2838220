/* Odds and ends: a typedef'd anonymous struct, __int128 and long double members, enum-typed and
   char bitfields, an array of records that hold bitfields, a _Bool member, an array of unions. */
// probe: t15_anon_t, struct t15, struct t15_bf
// probe-scalar: big
typedef struct {
	unsigned char kind;
	unsigned long long value;
} t15_anon_t;
enum t15_color { T15_RED = 1, T15_GREEN = 2, T15_BLUE = 3 };
struct t15_bf {
	enum t15_color color : 2;
	char small : 3;
	unsigned wide : 27;
};
struct t15 {
	char c;
	__int128 big;
	long double ld;
	_Bool flag;
	struct t15_bf bfs[3];
	union {
		int i;
		float f;
	} vals[2];
};
