/* T2: a bitfield that cannot fit in the rest of its unit after a char moves to the next unit. */
// probe: struct t2
// gcc: size 24; y@32 z@64 w@76 v@128
struct t2 {
	char x;
	unsigned y : 30;
	unsigned z : 12;
	unsigned w : 20;
	unsigned long long v : 40;
};
