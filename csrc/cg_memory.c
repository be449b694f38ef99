/* cg_memory.c: the array buffer cache (see cg_memory.h, Note [Array buffer cache]).
 * No Python, no NumPy headers. */
#include "cg_memory.h"

#include <stdlib.h>
#include <string.h>

#if !defined(_WIN32)
#include <pthread.h>
#define CG_MEM_HAVE_LOCK 1
#else
#define CG_MEM_HAVE_LOCK 0      /* no cache without a lock: plain base calls */
#endif

typedef struct {
    void *ptr;
    size_t size;          /* at least this many bytes are usable at ptr */
} cg_block;

static cg_mem_base base;
static int have_base = 0;
static cg_block slots[CG_MEM_SLOTS];    /* oldest first */
static int nslots = 0;
static size_t cached = 0;
static size_t limit = 0;                /* 0: the cache is off */
static size_t min_size = (size_t)1 << 20;
static uint64_t n_hits = 0, n_misses = 0, n_released = 0;
/* requested bytes of the big blocks handed out and not freed yet, and their high-water
 * mark: the cache keeps live + cached <= cap_of(high) (see alloc_big) */
static int64_t live = 0;
static int64_t high = 0;

#if CG_MEM_HAVE_LOCK
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
/* fork: the forking thread holds the lock across fork(), so the child's copy is
 * consistent and unlocked by that same thread. */
static void fork_prepare(void) { pthread_mutex_lock(&lock); }
static void fork_release(void) { pthread_mutex_unlock(&lock); }
static void register_fork(void) { pthread_atfork(fork_prepare, fork_release, fork_release); }
#define LOCK() pthread_mutex_lock(&lock)
#define UNLOCK() pthread_mutex_unlock(&lock)
#else
#define LOCK() ((void)0)
#define UNLOCK() ((void)0)
#endif

static void *plain_malloc(size_t size) { return malloc(size ? size : 1); }
static void *plain_calloc(size_t n, size_t e) { return calloc(n ? n : 1, e ? e : 1); }

static void *base_malloc(size_t size)
{
    return have_base ? base.malloc(base.ctx, size) : plain_malloc(size);
}

static void *base_calloc(size_t n, size_t e)
{
    return have_base ? base.calloc(base.ctx, n, e) : plain_calloc(n, e);
}

static void base_free(void *p, size_t size)
{
    if (have_base)
        base.free(base.ctx, p, size);
    else
        free(p);
}

void cg_mem_set_base(const cg_mem_base *b)
{
    base = *b;
    have_base = 1;
#if CG_MEM_HAVE_LOCK
    pthread_once(&once, register_fork);
#endif
}

/* Under the lock: remove and return the smallest cached block of [size, size + size / 8]
 * bytes (the newest among equals), or NULL. */
static void *take_locked(size_t size, size_t *got)
{
    int best = -1;
    size_t hi = size + size / 8;
    for (int i = nslots - 1; i >= 0; --i) {
        size_t s = slots[i].size;
        if (s >= size && s <= hi && (best < 0 || s < slots[best].size))
            best = i;
    }
    if (best < 0)
        return NULL;
    void *p = slots[best].ptr;
    *got = slots[best].size;
    cached -= slots[best].size;
    memmove(&slots[best], &slots[best + 1], (size_t)(nslots - best - 1) * sizeof(cg_block));
    nslots--;
    return p;
}

/* Under the lock: move the oldest blocks to out[] until `need` bytes or the whole cache
 * (need == SIZE_MAX) are gathered; the caller releases them after unlocking. */
static int evict_locked(size_t need, cg_block *out)
{
    int k = 0;
    size_t gathered = 0;
    while (k < nslots && gathered < need) {
        out[k] = slots[k];
        gathered += slots[k].size;
        cached -= slots[k].size;
        k++;
    }
    memmove(slots, slots + k, (size_t)(nslots - k) * sizeof(cg_block));
    nslots -= k;
    n_released += (uint64_t)k;
    return k;
}

static void release(cg_block *blocks, int n)
{
    for (int i = 0; i < n; ++i)
        base_free(blocks[i].ptr, blocks[i].size);
}

#ifdef CG_MEM_TRACE
#include <stdio.h>
#define TRACE(...) fprintf(stderr, __VA_ARGS__)
#else
#define TRACE(...) ((void)0)
#endif

/* The most live + cached may reach: the high-water mark of live plus half of it
 * (CG_MEM_HEADROOM_DIV = 2). Without the half, a training step whose temporaries come in
 * several sizes evicts the blocks a later request of another size would reuse: the GAT
 * step at 1M nodes faulted 5 GB of fresh pages every step (2.3 s of system time); with it
 * none (Note [Array buffer cache] in cg_memory.h). */
static int64_t cap_of(int64_t high_mark)
{
    return high_mark + high_mark / CG_MEM_HEADROOM_DIV;
}

static void *alloc_big(size_t size, int zero)
{
    TRACE("alloc %zu zero=%d\n", size, zero);
    cg_block victims[CG_MEM_SLOTS];
    int nv = 0;
    void *p = NULL;
    size_t got = 0;
    LOCK();
    if (limit) {
        p = take_locked(size, &got);
        if (p)
            n_hits++;
        else {
            /* keep live + cached within cap_of(the high-water mark of live): allocated
             * memory never exceeds 1.5x what the program had live at its peak so far */
            int64_t after = live + (int64_t)size;
            int64_t cap = cap_of(high > after ? high : after);
            int64_t room = cap - after;
            n_misses++;
            if ((int64_t)cached > room)
                nv = evict_locked(cached - (size_t)room, victims);
        }
    }
    live += (int64_t)size;
    if (live > high)
        high = live;
    UNLOCK();
    release(victims, nv);
    if (p) {
        if (zero)
            memset(p, 0, size);
        return p;
    }
    p = zero ? base_calloc(1, size) : base_malloc(size);
    if (p == NULL) {                            /* out of memory: drop the cache, retry */
        cg_mem_empty();
        p = zero ? base_calloc(1, size) : base_malloc(size);
    }
    return p;
}

void *cg_mem_malloc(void *ctx, size_t size)
{
    (void)ctx;
    if (CG_MEM_HAVE_LOCK && size >= min_size)
        return alloc_big(size, 0);
    return base_malloc(size);
}

void *cg_mem_calloc(void *ctx, size_t nelem, size_t elsize)
{
    (void)ctx;
    if (elsize && nelem > SIZE_MAX / elsize)
        return NULL;
    size_t size = nelem * elsize;
    if (CG_MEM_HAVE_LOCK && size >= min_size)
        return alloc_big(size, 1);
    return base_calloc(nelem, elsize);
}

void *cg_mem_realloc(void *ctx, void *ptr, size_t new_size)
{
    (void)ctx;
    return have_base ? base.realloc(base.ctx, ptr, new_size)
                     : realloc(ptr, new_size ? new_size : 1);
}

void cg_mem_free(void *ctx, void *ptr, size_t size)
{
    (void)ctx;
    if (ptr == NULL)
        return;
    if (size >= min_size)
        TRACE("free %zu\n", size);
    if (!CG_MEM_HAVE_LOCK || size < min_size) {
        base_free(ptr, size);
        return;
    }
    cg_block victims[CG_MEM_SLOTS];
    int nv = 0, kept = 0;
    LOCK();
    live -= (int64_t)size;
    if (live < 0)       /* a block resized by realloc (its old size is not known) */
        live = 0;
    if (limit && size <= limit) {
        if (nslots == CG_MEM_SLOTS)
            nv = evict_locked(1, victims);
        if (cached + size > limit)
            nv += evict_locked(cached + size - limit, victims + nv);
        slots[nslots].ptr = ptr;
        slots[nslots].size = size;
        nslots++;
        cached += size;
        kept = 1;
    }
    UNLOCK();
    release(victims, nv);
    if (!kept)
        base_free(ptr, size);
}

void cg_mem_configure(size_t new_limit, size_t new_min)
{
    cg_block victims[CG_MEM_SLOTS];
    int nv = 0;
    LOCK();
    limit = new_limit;
    if (new_min > 0)
        min_size = new_min;
    if (cached > limit)
        nv = evict_locked(cached - limit, victims);
    UNLOCK();
    release(victims, nv);
}

void cg_mem_empty(void)
{
    cg_block victims[CG_MEM_SLOTS];
    int nv;
    LOCK();
    nv = evict_locked(SIZE_MAX, victims);
    UNLOCK();
    release(victims, nv);
}

void cg_mem_stats(uint64_t out[9])
{
    LOCK();
    out[0] = cached;
    out[1] = (uint64_t)nslots;
    out[2] = n_hits;
    out[3] = n_misses;
    out[4] = n_released;
    out[5] = limit;
    out[6] = min_size;
    out[7] = (uint64_t)live;
    out[8] = (uint64_t)high;
    UNLOCK();
}
