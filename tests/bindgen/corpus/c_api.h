/* Functions, constants and names as a real C library declares them: array parameters, static
   consts, tags beside ordinary identifiers, Python keywords, nested tags, typedef chains.
   Implemented in test_c_api.py, built with gcc into libcapi.so. */
// probe: struct st, struct baz, struct outer, struct foo, struct with_enum_ptr, struct msg
// probe: struct wide
// probe-scalar: s u
// probe-const: FLAG_X FLAG_TOP NEG

/* Array parameters are pointers (C11 6.7.6.3p7). */
int sum_arr(const int a[], int n);
int sum4(int a[4]);
int sum_rows(int m[][3], int rows);
int sum_ptrs(int *ps[], int n);
typedef int vec3[3];
int sum_vec(vec3 v);
int apply(int f(int), int x);

/* static consts: values known when the header is compiled, exported by no library. */
static const unsigned long long FLAG_X = 0x2000ULL;
static const unsigned long long FLAG_TOP = 0x8000000000000000ULL;
static const int NEG = -5;
static const double HALF = 0.5;
static const char DEV_NAME[] = "card";
static int counter_copy = 3; /* not const: each C file has its own */

/* A tag and an ordinary identifier of one name (C keeps them apart, like struct stat/stat()). */
struct st { int x; };
int st(struct st *p);

/* Python keywords as C names. */
int lambda(int x);
extern int as;

/* A tag declared inside a record has file scope. */
struct outer { struct baz { int x; } b; int y; };
int baz_x(struct baz *p);

/* Every name here denotes the same type. */
struct foo { int a; };
typedef struct foo bar;
typedef bar foo;
int foo_a(foo *p);

/* An enum declared, never defined: pointers to it are fine, and so is a function returning it. */
enum never;
struct with_enum_ptr { enum never *p; int n; enum never_either (*f)(int); };

/* A function declared through a function typedef. */
typedef int unary(int);
unary twice;

/* String macros built by concatenation, also through other macros. */
#define DEV_DIR "/dev/dri"
#define DEV_NAME_MACRO "card"
#define DEV_PATH DEV_DIR "/" DEV_NAME_MACRO "%d"
#define DEV_PATH_PREFIX "x:" DEV_PATH

/* Macros that rename functions (cuda.h's unversioned names). */
int scale_v2(int x);
#define scale scale_v2
#define scale_alias scale
int add_v3(int a, int b);
#define add(a, b) add_v3(a, b)
#define add_swapped(a, b) add_v3(b, a)
int str_len(const char *s);

/* A flexible array member, filled by C and by Python. */
struct msg { int n; int data[]; };
struct msg *msg_new(int n);
int msg_sum(const struct msg *m);
void msg_free(struct msg *m);

/* cuda.h's other alias forms: a macro naming the function itself, one through a macro that
   returns its argument. */
#define scale_v2 scale_v2
#define PASS_API(api) api
#define scale_pass PASS_API(scale_v2)

/* 128-bit integers: fields read and written as Python ints; by value, refused. */
struct wide { __int128 s; unsigned __int128 u; };
void wide_set(struct wide *w);
unsigned long long wide_low(const struct wide *w);
__int128 wide_by_value(__int128 x);

/* Pointers to const bytes take Python bytes; a pointer to bytes C may write does not. */
#include <stdint.h>
typedef const uint8_t cbyte;
unsigned sum_bytes(const unsigned char *p, int n);
unsigned sum_u8(const uint8_t *p, int n);
int sum_s8(const signed char p[], int n);
unsigned sum_cbyte(cbyte *p, int n);
int first_byte(const void *p);
void fill_bytes(unsigned char *p, int n, unsigned char v);
