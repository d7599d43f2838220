// bindgen-target: {}
/* Records as a reader sees them: doc comments, bitfields, anonymous members, pointers, arrays. */

typedef unsigned int u32;
typedef unsigned long long u64;

/** A queue as the driver describes it. */
struct queue_desc {
	u64 ring_base;          /* GPU address of the ring */
	u32 ring_size;          /* bytes, a power of two */
	u32 priority : 4;       /* 0 (lowest) .. 15 */
	u32 type : 3;
	int delta : 5;          /* signed */
	union {
		u32 doorbell_offset;
		unsigned short doorbell_index;
	};
	struct queue_desc *next;
	char name[16];
	u32 regs[4];
};

struct opaque_ctx;

typedef struct {
	struct opaque_ctx *ctx;
	void *user;
	int (*callback)(int, void *);
} handle_t;
