/* packed and aligned together (kernel style __attribute__((packed, aligned(4)))): members at packed
   offsets, yet the record keeps the stated alignment, also when embedded. */
// probe: struct t18_pa, struct t18_holder
// gcc: t18_pa size 8 align 4, i@1 s@5; t18_holder size 12, pa@4
struct __attribute__((packed, aligned(4))) t18_pa {
	char c;
	int i;
	short s;
};
struct t18_holder {
	char c;
	struct t18_pa pa;
};
