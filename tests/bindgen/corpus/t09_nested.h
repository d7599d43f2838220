/* T9: nested anonymous records next to a named nested struct. */
// probe: struct t9
struct t9 {
	int a;
	struct {
		int b;
		struct {
			char c;
			short d;
		};
	};
	struct t9_inner {
		long e;
		char f;
	} named;
	union {
		struct {
			int g;
		};
		long h;
	};
	char z;
};
