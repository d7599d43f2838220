/* T4: signed bitfields (must read back negative), zero-width, unnamed and _Bool bitfields. */
// probe: struct t4
struct t4 {
	int s1 : 3;
	signed char s2 : 5;
	long long s3 : 33;
	unsigned : 0;
	unsigned char u : 2;
	int : 5;
	_Bool b : 1;
	short s4 : 7;
	unsigned : 0;
	signed char s5 : 1;
	int last;
};
