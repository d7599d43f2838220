/* T1: a packed struct whose bitfields have mixed declared types and straddle their units. */
// probe: struct t1
// gcc: size 10; a@0:3 b@3:20 c@23:9 d@32:40 e@byte 9
struct __attribute__((packed)) t1 {
	unsigned a : 3;
	unsigned b : 20;
	unsigned short c : 9;
	unsigned long long d : 40;
	char e;
};
