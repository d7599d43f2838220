/* T11: #pragma pack(1), a packed struct embedding a non-packed one, fields named like Python keywords. */
// probe: struct t11_p1, struct t11_inner, struct t11_outer, struct t11_kw
#pragma pack(push, 1)
struct t11_p1 {
	char c;
	int i;
	short s;
	long long l;
};
#pragma pack(pop)
struct t11_inner {
	int a;
	char b;
};
struct __attribute__((packed)) t11_outer {
	char c;
	struct t11_inner in;
	short s;
};
struct t11_kw {
	int in;
	int from;
	int lambda;
	int None;
};
