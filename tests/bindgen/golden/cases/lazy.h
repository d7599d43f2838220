// bindgen-target: {"lazy": true}
/* A lazy target: the same readable module plus an index, behind a small module. */

struct node { struct node *next; struct leaf *first; int v; };
struct leaf { unsigned a : 3; int b : 5; };
#define LEAF_MASK 0x3f  /* low six bits */
#define LEAF_OF(x) ((x) & LEAF_MASK)
