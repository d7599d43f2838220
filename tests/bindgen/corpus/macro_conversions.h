/* Function-like macros follow C's conversions when they are called (issue 15): an argument has the
   type a C literal of its value has, and the usual arithmetic conversions and unsigned wrap apply
   as in C. Also: a macro renaming a struct tag (sound/asound.h's __snd_pcm_sync_ptr) inside an
   ioctl, and a macro using a name defined on the command line (-D__force=). */
#define _IOC(dir, type, nr, size) (((dir) << 30) | ((size) << 16) | ((type) << 8) | (nr))
#define _IOWR(type, nr, size) _IOC(3U, (type), (nr), sizeof(size))

#define F_MUL2U(x) ((x) * 2u)
#define F_NEG(x) (-(x))
#define F_LTU(x) ((x) < 0u)
#define F_SHL(x, n) ((x) << (n))
#define F_DIVU(x) ((x) / 2u)
#define F_MODL(x) ((x) % 3L)
#define F_NOT(x) (~(x))
#define F_INNER(x) ((x) * 1u)
#define F_OUTER(x, y) (F_INNER(x) + (y))
#define F_PACK(a, b) ((((a) & 0xffff) << 16) | ((b) & 0xffff))
#define F_ORFLAGS(a, f) (F_PACK(a, a) | ((f) & 0xfc000000))
#define F_WIDE(x) ((x) + 1UL)
#define F_BYTE(x) ((unsigned char)(x) + 1)
#define F_CMP(a, b) ((a) > (b) ? (a) : (b))

#define __mc_tagged mc_tagged
struct __mc_tagged { int a; long b; };
#define MC_IOC _IOWR('A', 0x23, struct __mc_tagged)
#define MC_FORCED ((__force unsigned int) -1)
