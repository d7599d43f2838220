/* static const records and arrays: module constants with the values C gives them (designators,
   elided braces, unions, bitfields, anonymous members, conversions). Each is compared byte for
   byte with the object gcc compiles (test_c_static.py builds libcstatic.so). */
// probe: struct pt, struct box, union num, struct flags, struct anon_in

struct pt { int x; int y; };
struct box { struct pt a; struct pt b; unsigned char tag[4]; char name[6]; double w; };
union num { int i; float f; unsigned char b[4]; };
struct flags { unsigned lo : 3; signed mid : 4; unsigned hi : 9; unsigned char c; };
struct anon_in { int kind; union { int ival; double dval; }; struct { short s1, s2; }; };
enum col { RED = 3, GREEN };

static const struct pt ORIGIN = { 1, -2 };
static const struct pt ONLY_Y = { .y = 5 };
static const struct box BOX = { .b = { 7, 8 }, .tag = "ab", .name = "card", .w = 1.5 };
static const struct box BOX_ELIDED = { 1, 2, 3, 4, { 9 }, "x", 2.25 };
static const struct box BOX_NESTED = { .a.y = 6, 7, .b.x = 300 };
static const int PRIMES[] = { 2, 3, 5, 7 };
static const unsigned short TBL[6] = { [2] = 9, 1, [0] = 0x1ffff };
static const int GRID[2][3] = { { 1, 2 }, { 3 } };
static const int FLAT[2][2] = { 1, 2, 3, 4 };
static const struct pt PTS[] = { { 1, 2 }, [2] = { .x = 9 }, 4 };
static const union num NUM_I = { 0x01020304 };
static const union num NUM_F = { .f = 1.5f };
static const struct flags FLAGS = { .lo = 13, .mid = -3, .hi = 511, .c = 200 };
static const struct anon_in ANON = { 1, { .ival = 2 }, { 3, 4 } };
static const struct anon_in ANON_DESIG = { .dval = 0.5, .s2 = -1 };
static const enum col COLS[3] = { GREEN, RED };
static const double SCALE[3] = { 0.5, 2, -1.25 };
static const signed char SMALL[3] = { -1, 127, 200 };
static const int INT_FROM_FLOAT[2] = { 2.9, -2.9 };
static const struct pt ZERO = { 0 };
static const struct pt SIZED = { sizeof(struct box), (int)(sizeof(PRIMES) / sizeof(PRIMES[0])) };

/* Not constants Python can hold: reported with the reason. */
static const char *const NAMES[2] = { "a", "b" };
struct with_ptr { const char *s; int n; };
static const struct with_ptr WITH_PTR = { "s", 1 };
static const struct with_ptr WITH_NULL = { 0, 1 };
static const int RANGE[4] = { [0 ... 2] = 5 };
