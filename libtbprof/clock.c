/*
 * libtbprof core, the hook clock: CLOCK_MONOTONIC or a calibrated TSC for hook timestamps.
 */
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "core.h"
#include "core_priv.h"
#include "core_internal.h"
#include "tbp_config.h"

/* ------------------------------------------------------------ hook clock */

#if defined(__x86_64__)
static int tsc_usable = -1;   /* -1 unknown; writer thread only */
static uint64_t cal_tsc, cal_mono;

static bool clocksource_is_tsc(void)
{
	char buf[32] = "";
	int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
		O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	return n >= 3 && !strncmp(buf, "tsc", 3) && (n == 3 || buf[3] == '\n');
}

/* (TSC, CLOCK_MONOTONIC) read as close together as possible: the pair with
 * the shortest TSC bracket of a few tries, TSC taken at its middle. */
static void tsc_pair(uint64_t *tsc, uint64_t *mono)
{
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < 5; i++) {
		uint64_t a = __builtin_ia32_rdtsc();
		uint64_t m = tbp_now();
		uint64_t b = __builtin_ia32_rdtsc();
		if (b - a < best) {
			best = b - a;
			*tsc = a + (b - a) / 2;
			*mono = m;
		}
	}
}

void tsc_recalibrate(void)
{
	if (!tsc_wanted)
		return;
	if (tsc_usable < 0)
		tsc_usable = clocksource_is_tsc();
	if (!tsc_usable)
		return;
	uint64_t t = 0, m = 0;
	tsc_pair(&t, &m);
	if (cal_mono && m - cal_mono < 50000000ull)
		return;   /* too short a baseline for a precise rate */
	if (cal_mono && t > cal_tsc) {
		uint64_t mult = (uint64_t)(((unsigned __int128)(m - cal_mono) << 32) / (t - cal_tsc));
		uint64_t seq = __atomic_load_n(&tbp_tsc.seq, __ATOMIC_RELAXED);
		__atomic_store_n(&tbp_tsc.seq, seq + 1, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_RELEASE);
		__atomic_store_n(&tbp_tsc.tsc_base, t, __ATOMIC_RELAXED);
		__atomic_store_n(&tbp_tsc.mono_base, m, __ATOMIC_RELAXED);
		__atomic_store_n(&tbp_tsc.mult, mult, __ATOMIC_RELAXED);
		__atomic_store_n(&tbp_tsc.seq, seq + 2, __ATOMIC_RELEASE);
		__atomic_store_n(&tbp_tsc_on, 1, __ATOMIC_RELAXED);
	}
	cal_tsc = t;
	cal_mono = m;
}
#else
void tsc_recalibrate(void)
{
}
#endif
