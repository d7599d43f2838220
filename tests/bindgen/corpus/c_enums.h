/* C enums as Python enum classes (a target's `enums: IntEnum`): fields, parameters and return
   values stay the C integer; a value no enumerator names converts without an error.
   Implemented in test_c_enums.py, built with gcc into libcenums.so. */
// probe: struct paint

enum color { RED = 3, GREEN, BLUE = -2 };
typedef enum color color_t;
enum access_flags { ACCESS_NONE = 0, ACCESS_READ = 1, ACCESS_WRITE = 2, ACCESS_EXEC = 4 };
enum odd_names { mro = 1, _hidden_ = 2, __mangled = 3, plain = 4 };
enum big { BIG_MAX = 0xffffffffffULL };
typedef enum { ANON_A = 7 } anon_t;

struct paint { enum color c; color_t c2; unsigned access; enum big b; };

enum color next_color(enum color c);
int paint_sum(const struct paint *p);
color_t unknown_color(void);
