/* Issue 15 regressions from the Linux uapi tree. linux/bpf.h (bpf_sock_ops, bpf_sockopt, sk_msg_md,
   sk_reuseport_md): an unnamed bitfield inside an anonymous union got a generated name that was
   promoted over the parent's own anonymous member. linux/io_uring.h (io_uring_sqe): packed unions,
   whose alignment is 1 although their members want 2 or 4. */
// probe: struct t20_r1, struct t20_r2, union t20_r3, struct t20_r4
struct t20_r1 { int a; union { int x; }; union { void *p; long long :64; }; };
struct t20_r2 { unsigned a; union { unsigned short x, y; } __attribute__((packed)); };
union __attribute__((packed)) t20_r3 { unsigned short x; unsigned int y; };
struct t20_r4 {
	char c;
	union __attribute__((packed)) { unsigned short x; unsigned int y; } u;
	char d;
	union { struct { unsigned char lo : 3, : 2, hi : 3; }; unsigned char all; };
};
