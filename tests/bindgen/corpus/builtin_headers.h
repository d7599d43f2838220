/* Only clang's builtin headers: no include_dirs needed. */
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
struct uses_builtins { size_t n; bool ok; uint64_t big; };
