/* T5: an anonymous union holding a nested anonymous struct; members are reached as o.u1, o.lo. */
// probe: struct t5
struct t5 {
	int tag;
	union {
		unsigned u1;
		float f1;
		struct {
			unsigned short lo;
			unsigned short hi;
		};
	};
	char after;
};
