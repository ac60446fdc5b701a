/*
 * The analyzer's large blocks (analyze/an_defs.c): a vector that crosses
 * VEC_MAP_BYTES moves into a mapping of its own and keeps every item, grows
 * on by mremap, is reserved ahead and freed by vec_free; an_mem_map's blocks
 * are zeroed and an_mem_remap keeps what they hold, around the 2 MiB sizes
 * where a mapping becomes a whole number of huge pages; mappings given back
 * serve an_mem_get and an_mem_huge until an_mem_trim.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "an.h"

static int failures;

#define CHECK(cond, ...)                                                                                               \
	do {                                                                                                           \
		if (!(cond)) {                                                                                         \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                          \
			fprintf(stderr, __VA_ARGS__);                                                                  \
			fputc('\n', stderr);                                                                           \
			failures++;                                                                                    \
		}                                                                                                      \
	} while (0)

struct item {
	uint64_t a, b, c; /* 24 bytes: sizes that are no power of two */
};

static void check_vec(size_t n)
{
	struct vec v = {.item = sizeof(struct item)};
	for (size_t i = 0; i < n; i++) {
		struct item *it = vec_push(&v);
		CHECK(it && !it->a && !it->b && !it->c, "push %zu: not a zeroed slot", i);
		if (!it)
			return;
		*it = (struct item){i, ~i, i * 7};
	}
	CHECK(v.n == n, "%zu items, not %zu", v.n, n);
	size_t bad = 0;
	for (size_t i = 0; i < n; i++) {
		const struct item *it = VEC_AT(&v, struct item, i);
		bad += it->a != i || it->b != ~i || it->c != i * 7;
	}
	CHECK(!bad, "%zu of %zu items changed while the vector grew to %zu bytes", bad, n, v.cap * v.item);
	/* Reserved ahead, past the mapping's size: the items stay. */
	size_t want = v.cap * 3 + 1;
	CHECK(!vec_reserve(&v, want), "reserve failed");
	CHECK(v.cap >= want, "cap %zu after reserving %zu", v.cap, want);
	bad = 0;
	for (size_t i = 0; i < n; i++)
		bad += VEC_AT(&v, struct item, i)->a != i;
	CHECK(!bad, "%zu items changed by vec_reserve", bad);
	vec_free(&v);
	CHECK(!v.data && !v.n && !v.cap, "vec_free left data");
}

static void check_map(size_t bytes, size_t grown)
{
	uint8_t *p = an_mem_map(bytes);
	CHECK(p != NULL, "an_mem_map(%zu)", bytes);
	if (!p)
		return;
	size_t nonzero = 0;
	for (size_t i = 0; i < bytes; i += 997)
		nonzero += p[i] != 0;
	CHECK(!nonzero, "an_mem_map(%zu): not zeroed", bytes);
	for (size_t i = 0; i < bytes; i++)
		p[i] = (uint8_t)(i * 31 + 7);
	uint8_t *q = an_mem_remap(p, bytes, grown);
	CHECK(q != NULL, "an_mem_remap(%zu -> %zu)", bytes, grown);
	if (!q) {
		an_mem_unmap(p, bytes);
		return;
	}
	size_t bad = 0;
	for (size_t i = 0; i < bytes; i++)
		bad += q[i] != (uint8_t)(i * 31 + 7);
	CHECK(!bad, "an_mem_remap(%zu -> %zu): %zu bytes changed", bytes, grown, bad);
	memset(q + bytes, 0xa5, grown - bytes); /* the new part is writable */
	an_mem_unmap(q, grown);
}

/* glibc's own malloc (not a sanitizer's, whose blocks an_mem_huge leaves
 * alone): a large block is a mapping of its own, its 16-byte header
 * first, which is what an_mem_huge gives kept pages to. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define __SANITIZE_ADDRESS__ 1 /* (clang's way of saying it) */
#endif
#endif
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define GLIBC_MALLOC 1
#else
#define GLIBC_MALLOC 0
#endif
static int own_mapping(const void *b)
{
	return (((uintptr_t)b - 2 * sizeof(size_t)) & 4095) == 0;
}

/* A malloc'd block of `bytes` given kept pages by an_mem_huge: the byte
 * at `at` is the kept pages' `want` (under glibc's malloc), and the block
 * still grows by realloc and is freed. */
static void check_block_given(size_t bytes, size_t at, uint8_t want, const char *what)
{
	char *b = malloc(bytes);
	CHECK(b != NULL, "malloc(%zu)", bytes);
	if (!b)
		return;
	CHECK(own_mapping(b) || !GLIBC_MALLOC, "malloc(%zu) is not a mapping of its own behind glibc's header", bytes);
	an_mem_huge(b, bytes);
	CHECK((uint8_t)b[at] == want || !own_mapping(b), "an_mem_huge: %s", what);
	memset(b, 2, bytes);
	char *r = realloc(b, 2 * bytes);
	CHECK(r != NULL && r[bytes - 1] == 2 && r[0] == 2, "realloc of a block given kept pages (%zu)", bytes);
	free(r ? r : b);
}

/* Mappings given back are kept for an_mem_get and an_mem_huge: the same
 * pages come back with what they held (nothing zeroed them), and
 * an_mem_trim gives them to the kernel. */
static void check_pool(void)
{
	size_t mb = (size_t)1 << 20;
#ifdef __GLIBC__
	/* As tbanalyze (main.c): large blocks are mappings of their own, the
	 * threshold not raised by the frees before. */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
	an_mem_trim();
	uint8_t *p = an_mem_map(6 * mb);
	CHECK(p != NULL, "an_mem_map(6 MiB)");
	if (!p)
		return;
	for (size_t i = 0; i < 6 * mb; i += 4096)
		p[i] = (uint8_t)(i / 4096 + 1);
	an_mem_unmap(p, 6 * mb);
	uint8_t *q = an_mem_get(4 * mb);
	CHECK(q == p, "an_mem_get(4 MiB) did not take the 6 MiB given back");
	size_t kept = 0;
	for (size_t i = 0; q == p && i < 4 * mb; i += 4096)
		kept += q[i] == (uint8_t)(i / 4096 + 1);
	CHECK(q != p || kept == mb / 1024, "an_mem_get: %zu of %zu pages kept what they held", kept, mb / 1024);
	if (q)
		memset(q, 0x5a, 4 * mb);
	an_mem_unmap(q, 4 * mb);
	/* A malloc'd block's mapping replaced by the pages given back: its
	 * header stays (free and realloc work), the pages hold their bytes. */
	check_block_given(3 * mb, 4096, 0x5a, "the block's pages are not the ones given back");
	/* A block longer than the largest mapping kept: its first part. */
	p = an_mem_map(2 * mb);
	if (p)
		memset(p, 0x3c, 2 * mb);
	an_mem_unmap(p, 2 * mb);
	check_block_given(5 * mb, 8192, 0x3c, "the block's first part is not the 2 MiB given back");
	/* Nothing kept after a trim: a fresh, zeroed mapping. */
	p = an_mem_map(4 * mb);
	if (p)
		memset(p, 7, 4 * mb);
	an_mem_unmap(p, 4 * mb);
	an_mem_trim();
	q = an_mem_get(4 * mb);
	CHECK(q != NULL, "an_mem_get(4 MiB) after a trim");
	size_t nonzero = 0;
	for (size_t i = 0; q && i < 4 * mb; i += 4096)
		nonzero += q[i] != 0;
	CHECK(!nonzero, "an_mem_get after an_mem_trim: %zu pages not fresh", nonzero);
	an_mem_unmap(q, 4 * mb);
	an_mem_trim();
}

int main(void)
{
	/* Below, at and across VEC_MAP_BYTES (1 MiB: 43 690 items of 24 bytes),
	 * and on through mremap growth past 2 MiB and 8 MiB. */
	size_t at_map = VEC_MAP_BYTES / sizeof(struct item);
	size_t ns[] = {0, 1, 16, 17, at_map - 1, at_map, at_map + 1, 4 * at_map + 3, 9 * at_map};
	for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
		check_vec(ns[i]);
	size_t mb = (size_t)1 << 20;
	check_map(4096, 8192);
	check_map(mb, 2 * mb);
	check_map(2 * mb - 1, 2 * mb + 1);
	check_map(2 * mb, 4 * mb);
	check_map(3 * mb + 5, 9 * mb + 7);
	an_mem_unmap(NULL, mb); /* nothing to give back */
	check_pool();
	/* an_mem_huge on a malloc'd block of each kind: advice, or pages given
	 * back (check_map's). */
	for (size_t sz = 1000; sz <= 16 * mb; sz *= 4) {
		char *b = malloc(sz);
		CHECK(b != NULL, "malloc(%zu)", sz);
		an_mem_huge(b, sz);
		if (b)
			memset(b, 1, sz);
		char *r = realloc(b, 2 * sz); /* realloc still works on it */
		CHECK(r != NULL && r[sz - 1] == 1, "realloc after an_mem_huge(%zu)", sz);
		free(r ? r : b);
	}
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("analyze-mem: vectors to %zu items, mappings to 9 MiB: ok\n", ns[sizeof ns / sizeof *ns - 1]);
	return 0;
}
