/* The SIMD switch (tbprof/simd.h): the one place that reads TBP_SIMD, so the
 * tests can run every path of the reader, the tape and the merge on a CPU that
 * would otherwise always take the widest one. */
#include "tbprof/simd.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static enum tbp_simd_level cpu_level(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
	/* (a library's code may run before the constructor that fills the
	 * CPU model in; a second call costs nothing) */
	__builtin_cpu_init();
	/* GCC's and clang's "avx2" include the OS's saving of the YMM registers (XGETBV) */
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("ssse3"))
		return TBP_SIMD_AVX2;
	if (__builtin_cpu_supports("ssse3"))
		return TBP_SIMD_SSSE3;
#endif
	return TBP_SIMD_PLAIN;
}

enum tbp_simd_level tbp_simd_level(void)
{
	enum tbp_simd_level level = cpu_level();
	const char *env = getenv("TBP_SIMD");
	if (!env || !*env)
		return level;
	enum tbp_simd_level cap;
	if (!strcmp(env, "0") || !strcasecmp(env, "plain"))
		cap = TBP_SIMD_PLAIN;
	else if (!strcasecmp(env, "ssse3"))
		cap = TBP_SIMD_SSSE3;
	else if (!strcasecmp(env, "avx2"))
		cap = TBP_SIMD_AVX2;
	else {
		/* Once: every reader and every analysis asks, and a report
		 * opens several. */
		static atomic_int warned;
		if (!atomic_exchange(&warned, 1))
			fprintf(stderr, "tbprof: TBP_SIMD=%s is not plain, 0, ssse3 or avx2; using the CPU's best\n",
				env);
		return level;
	}
	return cap < level ? cap : level;
}
