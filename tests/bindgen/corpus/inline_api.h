/* An API made of static inline functions, as liburing's io_uring_prep_* are: they fill records
   through pointers, take and return records by value, and call a library function. Bound through
   compiled wrappers (wrap_static_fns); the library part is built by test_wrappers.py. */
// probe: struct sqe, struct pair


struct sqe {
	unsigned char opcode;
	unsigned char flags;
	int fd;
	unsigned long long addr;
	unsigned len;
	unsigned long long user_data;
};

struct pair { int a, b; };

int lib_scale(int x); /* in the library */

static inline void prep_rw(int op, struct sqe *sqe, int fd, const void *addr, unsigned len,
			   unsigned long long offset)
{
	sqe->opcode = (unsigned char)op;
	sqe->flags = 0;
	sqe->fd = fd;
	sqe->addr = (unsigned long long)(unsigned long)addr + offset;
	sqe->len = len;
}

/* Fills a no-op request. */
static inline void prep_nop(struct sqe *sqe) { prep_rw(0, sqe, -1, ((void *)0), 0, 0); }

static inline void sqe_set_data(struct sqe *sqe, void *data)
{
	sqe->user_data = (unsigned long long)(unsigned long)data;
}

static inline void *sqe_get_data(const struct sqe *sqe) { return (void *)(unsigned long)sqe->user_data; }

static inline struct pair make_pair(int a, int b) { struct pair p = {a, b}; return p; }

static inline int pair_sum(struct pair p) { return p.a + p.b; }

static inline int scaled(int x) { return lib_scale(x) + 1; }

inline int plain_inline(int x) { return x * 3; }

static inline int (*pick(int k))(int) { return k ? lib_scale : 0; }

static int declared_only(int);

static inline int sum_all(int n, ...) { return n; }
