/* T13b: arrays of structs, pointer fields (also to an opaque struct and to itself), a struct of doubles. */
// probe: struct t13_pt, struct t13_list
struct t13_pt {
	double x, y, z;
};
struct t13_fwd;
struct t13_list {
	struct t13_pt pts[3];
	struct t13_pt *next;
	const char *name;
	void *opaque;
	struct t13_list *self;
	struct t13_fwd *fwd;
	int **pp;
	char tag;
};
