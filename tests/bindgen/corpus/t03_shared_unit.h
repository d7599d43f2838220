/* T3: bitfields of different declared types sharing one 4-byte unit. */
// probe: struct t3
// gcc: size 4
struct t3 {
	unsigned char a : 4;
	unsigned short b : 6;
	unsigned c : 20;
	unsigned char d : 2;
};
