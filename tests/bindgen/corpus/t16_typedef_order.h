/* A typedef'd anonymous struct embedded by value in a record whose name sorts before it: its layout
   must be set up first (typedef struct {...} name_t is the commonest style in vendor headers). */
// probe: struct t16_a, t16_z_t, struct t16_b
typedef struct {
	unsigned char kind;
	unsigned long long value;
} t16_z_t;
struct t16_a {
	char c;
	t16_z_t z;
	t16_z_t zs[2];
};
typedef struct t16_named_s {
	short s;
} t16_named_t;
struct t16_b {
	char c;
	t16_named_t n;
};
