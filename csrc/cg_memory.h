/* cg_memory.h: a cache of large freed array buffers behind NumPy's data allocator.
 *
 * Note [Array buffer cache]: glibc serves blocks above its mmap threshold (at most 32 MiB)
 * with mmap and returns them with munmap, so every step of a training loop that makes
 * arrays of hundreds of MB faults all their pages in again (kernel zeroing, and in a VM the
 * host's faults): at 1M nodes / 10M edges the GAT step spent 4.4 of its 11.3 s in the
 * kernel. These functions keep freed blocks of at least `min_size` bytes and hand them
 * back to later requests of up to the same size (best fit, at most 1/8 larger), so the
 * pages stay mapped and touched.
 *
 * Peak memory, in allocated bytes, grows by at most a half: the cache counts the bytes of
 * big blocks handed out and not freed (live) and their high-water mark; a request it cannot
 * serve first releases cached blocks (oldest first) until live + cached + the request fit
 * under 1.5x that mark, so live + cached never exceeds 1.5x the largest live total the
 * program had so far (its peak without the cache), while between peaks the freed blocks
 * stay for reuse. The half is headroom for steps whose temporaries come in several sizes:
 * under the mark itself the GAT step at 1M nodes / 10M edges evicted the blocks a later
 * request of another size would have reused and faulted 5 GB of fresh pages a step (2.3 s
 * of its 11 s in the kernel); with the headroom it faults none after its second step
 * (step 8.4 s, peak RSS 6.6 GB against 4.7 GB). Resident memory can also be somewhat higher
 * than without the cache for another reason: a fresh block's pages are backed only once
 * written, a reused block's all are, so an array that leaves pages untouched (a scratch
 * array used in part, a served block up to 1/8 larger than asked) costs more. NumPy's
 * realloc does not say the old size, so a big block resized by realloc is counted
 * approximately (live is clamped at 0); the limit bounds the cache regardless. Cached
 * bytes are bounded by `limit` (oldest released first) and by CG_MEM_SLOTS blocks; cg_mem_empty() releases everything. A failed allocation releases
 * the whole cache and retries once.
 *
 * Pure C, no Python objects. Thread-safe (one mutex, never held while calling malloc,
 * the base allocator or memset; released to its owner in a forked child). Blocks come from
 * the base allocator and go back to it;
 * calloc of a cached block zeroes it with memset. Below `min_size` the calls are plain
 * calls of the base allocator.
 */
#ifndef CGRAD_CG_MEMORY_H
#define CGRAD_CG_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CG_MEM_SLOTS 64
/* live + cached <= high + high / CG_MEM_HEADROOM_DIV (see the Note) */
#define CG_MEM_HEADROOM_DIV 2

/* The allocator that the cache sits on (NumPy's default handler's four functions, which
 * keep NumPy's small-block cache and its huge-page advice); the layout of NumPy's
 * PyDataMemAllocator. Every block the cache holds was allocated by it and goes back to it. */
typedef struct {
    void *ctx;
    void *(*malloc)(void *ctx, size_t size);
    void *(*calloc)(void *ctx, size_t nelem, size_t elsize);
    void *(*realloc)(void *ctx, void *ptr, size_t new_size);
    void (*free)(void *ctx, void *ptr, size_t size);
} cg_mem_base;

/* Set the base allocator; must be called before the first cg_mem_* allocation call and
 * never changed afterwards (blocks already handed out belong to it). */
void cg_mem_set_base(const cg_mem_base *base);

/* The four functions of NumPy's PyDataMemAllocator (ctx unused). */
void *cg_mem_malloc(void *ctx, size_t size);
void *cg_mem_calloc(void *ctx, size_t nelem, size_t elsize);
void *cg_mem_realloc(void *ctx, void *ptr, size_t new_size);
void cg_mem_free(void *ctx, void *ptr, size_t size);

/* Configuration: the cap on cached bytes (0 disables caching and empties the cache) and
 * the smallest block size cached. */
void cg_mem_configure(size_t limit, size_t min_size);

/* Release every cached block. */
void cg_mem_empty(void);

/* Counters: out[0] cached bytes, [1] cached blocks, [2] hits, [3] misses, [4] blocks
 * released, [5] limit, [6] min_size, [7] live bytes of big blocks, [8] their high-water
 * mark. */
void cg_mem_stats(uint64_t out[9]);

#ifdef __cplusplus
}
#endif

#endif
