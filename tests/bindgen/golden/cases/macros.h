// bindgen-target: {}
/* Constants, function-like macros and ioctls, with their comments. */

#define _IOC(dir, type, nr, size) (((dir) << 30) | ((size) << 16) | ((type) << 8) | (nr))
#define _IOWR(type, nr, t) _IOC(3U, (type), (nr), sizeof(t))

struct req { unsigned int a, b; };

#define DEMO_VERSION 3          /* the interface version */
/* The largest transfer in one request, in bytes. */
#define DEMO_MAX_BYTES (1U << 20)
#define DEMO_NAME "demo"
#define DEMO_NEG (-7 / 2)
#define DEMO_FIELD(x) (((x) & 0xff) << 8)
#define DEMO_PACK(a, b, c, d) ((((a) & 0xffff) << 48) | (((b) & 0xffff) << 32) | (((c) & 0xffff) << 16) | ((d) & 0xffff))
#define DEMO_IOC_SUBMIT _IOWR('D', 1, struct req) /* submit a request */

enum demo_state {
	DEMO_IDLE,      /* nothing queued */
	DEMO_BUSY = 4,  /* running */
};
