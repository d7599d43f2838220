/* Sibling anonymous structs inside one anonymous union (clang gives them one USR: c:@S@t14@Ua@Sa). */
// probe: struct t14
// gcc: size 24; a@8 b@12 c@8 d@16 e@8
struct t14 {
	int kind;
	union {
		struct {
			int a;
			short b;
		};
		struct {
			long long c;
			char d;
		};
		struct {
			char e[3];
		};
	};
};
