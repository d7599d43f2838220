/* Attribute combinations seen in kernel and vendor headers: pack(2)/pack(4) with
   bitfields and 8-byte members, a bare aligned attribute, an over-aligned union of chars, anonymous
   bitfield structs inside a union, 64-bit bitfields, a signed enum bitfield. */
// probe: struct t17_p2, struct t17_p4, struct t17_bare, union t17_ou, struct t17_reg
// probe: struct t17_wide, struct t17_senum, struct t17_holder
#pragma pack(push, 2)
struct t17_p2 {
	char a;
	int b : 20;
	int c : 20;
	long long d;
	char e;
};
#pragma pack(pop)
#pragma pack(push, 4)
struct t17_p4 {
	char c;
	long long l;
	double d;
	short s;
};
#pragma pack(pop)
struct t17_bare {
	char c;
	int x __attribute__((aligned));
};
union __attribute__((aligned(8))) t17_ou {
	char c[3];
	unsigned char u;
};
struct t17_reg {
	union {
		struct {
			unsigned lo : 12;
			unsigned mid : 8;
			signed hi : 12;
		};
		unsigned raw;
	};
	unsigned short tail : 9;
};
struct t17_wide {
	unsigned long long a : 64;
	unsigned long b : 40;
	unsigned long c : 30;
	long d : 63;
};
enum t17_sign { T17_NEG = -2, T17_POS = 1 };
struct t17_senum {
	enum t17_sign e : 2;
	unsigned char after : 3;
};
struct t17_holder {
	char c;
	struct t17_p2 p2;
	union t17_ou ou[2];
	struct t17_reg reg;
};
