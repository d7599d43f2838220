/* T13: the kernel's __DECLARE_FLEX_ARRAY: flexible arrays behind empty structs in an anonymous union. */
// probe: struct t13
#define __DECLARE_FLEX_ARRAY(TYPE, NAME) \
	struct { \
		struct { } __empty_ ## NAME; \
		TYPE NAME[]; \
	}
struct t13 {
	unsigned len;
	union {
		__DECLARE_FLEX_ARRAY(unsigned char, bytes);
		__DECLARE_FLEX_ARRAY(unsigned, words);
	};
};
