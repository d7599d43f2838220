/* T10: function-pointer fields, a typedef'd one and an array of them. */
// probe: struct t10
typedef int (*t10_cb)(void *ctx, int n);
struct t10 {
	void (*fn)(void);
	int (*arr[4])(int, char *);
	t10_cb cb;
	double (*ret_d)(double);
	char tag;
	t10_cb cbs[2];
};
