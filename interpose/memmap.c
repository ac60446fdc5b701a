/*
 * Allocation maps: device/managed allocations and page-locked host ranges,
 * as sorted arrays of [start, end) under one mutex.  Allocations are rare
 * (PyTorch caches them), copies read the map with a binary search.  They
 * give Free records their size and copies their direction (for
 * cudaMemcpyDefault) and pinned/pageable host side.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "hook.h"

struct range {
	uint64_t start, end;
	unsigned kind;
};

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static struct range *ranges;
static size_t nranges, cap_ranges;
#define MAX_RANGES (1u << 20)   /* memory bound: 24 MiB worst case */

/* index of the first range with start > ptr */
static size_t upper(uint64_t ptr)
{
	size_t lo = 0, hi = nranges;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (ranges[mid].start <= ptr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Fork (lent to libtbprof's atfork handlers through tbp_register_hook_ops): the map's lock and the
 * kernel-name table's are leaves, taken last and released first. */
void tbp_names_fork_prepare(void) TBP_HIDDEN;
void tbp_names_fork_parent(void) TBP_HIDDEN;
void tbp_names_fork_child(void) TBP_HIDDEN;

static void memmap_fork_prepare(void)
{
	pthread_mutex_lock(&mem_lock);
	tbp_names_fork_prepare();
}

static void memmap_fork_parent(void)
{
	tbp_names_fork_parent();
	pthread_mutex_unlock(&mem_lock);
}

static void memmap_fork_child(void)
{
	tbp_names_fork_child();
	pthread_mutex_init(&mem_lock, NULL);
}

static const struct tbp_hook_ops memmap_ops = {
	.rank = TBP_RANK_LEAF,
	.fork_prepare = memmap_fork_prepare,
	.fork_parent = memmap_fork_parent,
	.fork_child = memmap_fork_child,
};

/* After tbp_real_dlsym_init (101), before any default-priority constructor. */
__attribute__((constructor(102))) static void memmap_register(void)
{
	tbp_register_hook_ops(&memmap_ops);
}

void tbp_mem_add(uint64_t ptr, uint64_t bytes, unsigned kind)
{
	if (!ptr)
		return;
	pthread_mutex_lock(&mem_lock);
	size_t i = upper(ptr);
	if (i > 0 && ranges[i - 1].start == ptr) {
		/* Reuse of an address whose free we did not see. */
		ranges[i - 1].end = ptr + (bytes ? bytes : 1);
		ranges[i - 1].kind = kind;
		goto out;
	}
	if (nranges == cap_ranges) {
		if (cap_ranges >= MAX_RANGES)
			goto out;
		size_t ncap = cap_ranges ? cap_ranges * 2 : 256;
		struct range *n = realloc(ranges, ncap * sizeof *n);
		if (!n)
			goto out;
		ranges = n;
		cap_ranges = ncap;
	}
	memmove(&ranges[i + 1], &ranges[i], (nranges - i) * sizeof *ranges);
	ranges[i] = (struct range){ ptr, ptr + (bytes ? bytes : 1), kind };
	nranges++;
out:
	pthread_mutex_unlock(&mem_lock);
}

uint64_t tbp_mem_remove(uint64_t ptr)
{
	uint64_t bytes = 0;
	if (!ptr)
		return 0;
	pthread_mutex_lock(&mem_lock);
	size_t i = upper(ptr);
	if (i > 0 && ranges[i - 1].start == ptr) {
		bytes = ranges[i - 1].end - ranges[i - 1].start;
		memmove(&ranges[i - 1], &ranges[i], (nranges - i) * sizeof *ranges);
		nranges--;
	}
	pthread_mutex_unlock(&mem_lock);
	return bytes;
}

unsigned tbp_mem_kind_of(uint64_t ptr)
{
	unsigned kind = 0;
	pthread_mutex_lock(&mem_lock);
	size_t i = upper(ptr);
	if (i > 0 && ptr < ranges[i - 1].end)
		kind = ranges[i - 1].kind;
	pthread_mutex_unlock(&mem_lock);
	return kind;
}

static uint64_t host_flag(uint64_t host_ptr)
{
	return tbp_mem_kind_of(host_ptr) == TBP_RANGE_PINNED ? TBP_COPYF_PINNED : TBP_COPYF_PAGEABLE;
}

void tbp_classify_copy(struct tbp_record *rec, uint64_t dst, uint64_t src, int cuda_kind)
{
	struct tbp_memcpy *m = &rec->u.memcpy;
	m->dst = dst;
	m->src = src;
	switch (cuda_kind) {
	case 0:
		m->copy_kind = TBP_COPY_H2H;
		break;
	case 1:
		m->copy_kind = TBP_COPY_H2D;
		m->flags |= host_flag(src);
		break;
	case 2:
		m->copy_kind = TBP_COPY_D2H;
		m->flags |= host_flag(dst);
		break;
	case 3:
		m->copy_kind = TBP_COPY_D2D;
		break;
	default: {
		/* cudaMemcpyDefault: unified addressing, infer from our maps. */
		unsigned ks = tbp_mem_kind_of(src), kd = tbp_mem_kind_of(dst);
		bool dev_s = ks == TBP_RANGE_DEVICE || ks == TBP_RANGE_MANAGED;
		bool dev_d = kd == TBP_RANGE_DEVICE || kd == TBP_RANGE_MANAGED;
		if (dev_s && dev_d) {
			m->copy_kind = TBP_COPY_D2D;
		} else if (dev_s) {
			m->copy_kind = TBP_COPY_D2H;
			m->flags |= kd == TBP_RANGE_PINNED ? TBP_COPYF_PINNED : TBP_COPYF_PAGEABLE;
		} else if (dev_d) {
			m->copy_kind = TBP_COPY_H2D;
			m->flags |= ks == TBP_RANGE_PINNED ? TBP_COPYF_PINNED : TBP_COPYF_PAGEABLE;
		} else {
			m->copy_kind = TBP_COPY_H2H;
		}
		break;
	}
	}
}
