/* Bitfield records at the edges: packed records smaller than the declared unit, a 60-bit field that
   cannot share a unit with a char, bitfields right before a member that sits inside their unit, and a
   union holding a packed bitfield struct. */
// probe: struct t19_one, struct t19_three, struct t19_ll, struct t19_after, union t19_u
struct __attribute__((packed)) t19_one {
	int a : 1;
};
struct __attribute__((packed)) t19_three {
	unsigned long long a : 20;
	unsigned b : 3;
};
struct t19_ll {
	char c;
	long long x : 60;
	long long y : 1;
};
struct t19_after {
	unsigned a : 4;
	unsigned char b;
	unsigned c : 4;
	unsigned short d;
	unsigned e : 9;
};
union t19_u {
	struct t19_three t;
	struct __attribute__((packed)) {
		unsigned char lo : 4;
		unsigned short mid : 12;
		unsigned char hi;
	} parts;
	unsigned char raw[3];
};
