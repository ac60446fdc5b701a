/*
 * The instruction-set level the SIMD paths may use, one switch for all of them: the trace reader's
 * decode (trace/reader.c), the analyzer's record tape (analyze/an_tape.c) and its merge queues
 * (analyze/an_merge.c) each pick a path by it.  Internal to the project (not part of
 * libtbprof-trace.so's API).
 */
#ifndef TBPROF_SIMD_H
#define TBPROF_SIMD_H

#ifdef __cplusplus
extern "C" {
#endif

/* Ordered: a path needs the level at least its own.  PLAIN is what the compiler's baseline gives
 * (SSE2 on x86-64). */
enum tbp_simd_level {
	TBP_SIMD_PLAIN = 0,
	TBP_SIMD_SSSE3 = 1,
	TBP_SIMD_AVX2 = 2,
};

/* The best level the CPU has (SSSE3; AVX2 with the OS saving its registers), capped by TBP_SIMD in
 * the environment: "plain" (or "0"), "ssse3", "avx2".  The environment is read at every call, so
 * a test may switch paths between two readers; an unknown value warns once on stderr and leaves
 * the CPU's best.  A path that needs more than its level (BMI2, POPCNT) still checks for it. */
enum tbp_simd_level tbp_simd_level(void);

#ifdef __cplusplus
}
#endif

#endif
