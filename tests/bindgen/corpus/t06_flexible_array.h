/* T6: flexible array members. */
// probe: struct t6, struct t6b
// gcc: t6 size 8, data@8
struct t6 {
	unsigned n;
	unsigned flags;
	char data[];
};
struct t6b {
	unsigned short n;
	long long items[];
};
