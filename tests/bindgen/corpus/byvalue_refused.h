/* Calls libffi gets wrong (issue 15): a packed {char; double} record by value crashes CPython, a
   long double result comes back as nan, a union by value has no libffi type. bindgen emits no
   callable for these and says why; the plain ones beside them still work. */
struct __attribute__((packed)) bv_packed { char c; double d; };
union bv_union { int i; float f; };
struct bv_outer { int n; struct bv_packed p; };
struct bv_plain { double x, y; };

double bv_packed_sum(struct bv_packed s);
struct bv_packed bv_packed_make(double d);
long double bv_ld_get(void);
double bv_ld_arg(long double x);
int bv_union_get(union bv_union u);
double bv_outer_sum(struct bv_outer o);
double bv_plain_sum(struct bv_plain s);
double bv_by_pointer(const struct bv_packed *s);
static inline int bv_inline(int x) { return x + 1; }
