/* T12b: 2-D arrays, and a union holding a struct of bitfields. */
// probe: union t12_w, struct t12
union t12_w {
	unsigned all;
	struct {
		unsigned lo : 16;
		unsigned hi : 16;
	} parts;
};
struct t12 {
	int m[2][3];
	short n[2][2];
	char c;
	union t12_w w;
	unsigned char grid[3][2][5];
};
