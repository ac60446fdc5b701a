/*
 * libtbprof core: where each Python thread is NOW, for the flight recorder's stall dump
 * (`--flight-stall S`, flight.c).  A hang's interesting stack is the one a thread is blocked in,
 * which no event recorded: the hooks record a thread's stack only when it makes a call we trace.
 * So when a stall is detected, the control thread walks every Python thread state of the main
 * interpreter and writes one NOTICE per thread ("a stall: Python thread 1 of 2 (the oldest: the
 * main thread, normally) is now in: train.py:57 in wait_batch <- train.py:80 in main"), which the
 * dump then holds (`tbanalyze dump`).
 *
 * The walk runs on another thread than the one walked, without the GIL, while that thread may be
 * running: every read goes through process_vm_readv on our own pid (or, where that is refused, a
 * write into a pipe), which fails with EFAULT on an address that is not mapped instead of
 * faulting, and every pointer is checked as the event walker checks them (python.c ptr_ok).  A
 * thread whose frames change under the walk gives a shorter or partly wrong stack, never a crash.
 * The layout is the walker's (tbp_py_layout_running: same offsets, same 3.13 derivation).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core.h"
#include "core_priv.h"
#include "core_internal.h"
#include "python_internal.h"

#define STALL_MAX_THREADS 64
#define STALL_MAX_FRAMES 24
#define STALL_WALK_LIMIT 4096   /* frames visited at most, shim frames included */

static int pipe_fds[2] = { -1, -1 };

/* Copies len (<= 4096) bytes at addr into buf; false (never a fault) when they are not all readable. */
static bool safe_read_chunk(uintptr_t addr, void *buf, size_t len)
{
	if (addr < 4096 || addr >= (1ull << 56) || len == 0 || len > 4096)
		return false;
	struct iovec local = { buf, len }, remote = { (void *)addr, len };
	ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
	if (n == (ssize_t)len)
		return true;
	if (n >= 0 || errno == EFAULT)
		return false;
	/* process_vm_readv refused (seccomp, ENOSYS): the kernel's copy through a pipe faults softly too. */
	if (pipe_fds[0] < 0 && pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0)
		return false;
	if (write(pipe_fds[1], (const void *)addr, len) != (ssize_t)len)
		return false;
	return read(pipe_fds[0], buf, len) == (ssize_t)len;
}

static bool safe_read(uintptr_t addr, void *buf, size_t len)
{
	for (size_t done = 0; done < len; done += 4096)
		if (!safe_read_chunk(addr + done, (char *)buf + done, len - done < 4096 ? len - done : 4096))
			return false;
	return len > 0;
}

static bool rd_word(uintptr_t addr, uintptr_t *out)
{
	return safe_read(addr, out, sizeof *out);
}

static bool ptr_ok(uintptr_t p)
{
	return p >= 4096 && p < (1ull << 56) && (p & 7) == 0;
}

/* Text of a compact str object (code object names and file names are): ASCII, or its cached
 * UTF-8; "?" otherwise. */
static void read_str(const struct py_layout *L, uintptr_t s, char *out, size_t cap)
{
	snprintf(out, cap, "?");
	unsigned char head[48];
	if (!ptr_ok(s) || !safe_read(s, head, 40))
		return;
	int64_t length;
	uint32_t state;
	memcpy(&length, head + 16, sizeof length);
	memcpy(&state, head + 32, sizeof state);
	bool compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
	if (!compact || length < 0 || length > (1 << 20))
		return;
	uintptr_t data = 0;
	if (ascii) {
		data = s + L->ascii_size;
	} else {
		uintptr_t pair[2];   /* utf8_length, utf8 */
		if (!safe_read(s + L->ascii_size, pair, sizeof pair) || !pair[1] || (int64_t)pair[0] < 0)
			return;
		length = (int64_t)pair[0];
		data = pair[1];
	}
	size_t n = (size_t)length < cap - 1 ? (size_t)length : cap - 1;
	if (n && safe_read(data, out, n))
		out[n] = 0;
}

static int code_line(const struct py_layout *L, uintptr_t code, uint32_t index)
{
	int first = 0;
	uintptr_t lt = 0;
	if (!safe_read(code + L->co_firstlineno, &first, sizeof first) || !rd_word(code + L->co_linetable, &lt) ||
	    !ptr_ok(lt))
		return first;
	/* A long module's <module> code has a table of tens of KiB; only the control thread walks. */
	static uint8_t table[1 << 20];
	int64_t size;
	if (!safe_read(lt + 16, &size, sizeof size) || size <= 0 || size > (int64_t)sizeof table)
		return first;
	if (!safe_read(lt + 32, table, (size_t)size))   /* PyBytesObject.ob_sval */
		return first;
	int line = L->linetable_310 ? tbp_py_line_310(table, (size_t)size, first, index * 2)
		: tbp_py_line_311(table, (size_t)size, first, index);
	return line >= 0 ? line : first;
}

/* Appends "file:line in name" for each frame from `frame` outwards; the number of frames. */
static unsigned describe_stack(const struct py_layout *L, const void *code_type, uintptr_t frame, char *out,
	size_t cap)
{
	size_t used = strlen(out);
	unsigned n = 0;
	for (unsigned visited = 0; frame && n < STALL_MAX_FRAMES && visited < STALL_WALK_LIMIT; visited++) {
		uintptr_t code = 0, prev = 0, type = 0;
		if (!ptr_ok(frame) || !rd_word(frame + L->fr_code, &code) || !rd_word(frame + L->fr_prev, &prev))
			break;
		if (L->owner_cstack >= 0) {
			char owner;
			if (!safe_read(frame + L->fr_owner, &owner, 1))
				break;
			if (owner == L->owner_cstack) {
				frame = prev;
				continue;
			}
		}
		if (!ptr_ok(code) || !rd_word(code + 8, &type) || type != (uintptr_t)code_type)
			break;
		int64_t index;
		if (L->instr_is_index) {
			int lasti;
			if (!safe_read(frame + L->fr_instr, &lasti, sizeof lasti))
				break;
			index = lasti;
		} else {
			uintptr_t instr;
			int64_t ncode;   /* ob_size: code units (3.11+) */
			if (!rd_word(frame + L->fr_instr, &instr) || !safe_read(code + 16, &ncode, sizeof ncode))
				break;
			index = ((int64_t)instr - (int64_t)(code + L->co_code)) / 2;
			if (index >= ncode)
				break;
		}
		frame = prev;
		if (index < 0)
			continue;   /* pushed, not started */
		char file[512], name[256];
		uintptr_t file_obj = 0, name_obj = 0;
		rd_word(code + L->co_filename, &file_obj);
		rd_word(code + L->co_name, &name_obj);
		read_str(L, file_obj, file, sizeof file);
		read_str(L, name_obj, name, sizeof name);
		int w = snprintf(out + used, cap - used, "%s%s:%d in %s", n ? " <- " : "", file,
			code_line(L, code, (uint32_t)index), name);
		if (w < 0 || (size_t)w >= cap - used) {
			out[used] = 0;
			break;
		}
		used += (size_t)w;
		n++;
	}
	return n;
}

/* The frame a thread state is executing (python.c top_frame, read safely). */
static uintptr_t current_frame(const struct py_layout *L, uintptr_t tstate)
{
	uintptr_t top = 0;
	if (!rd_word(tstate + L->ts_top, &top))
		return 0;
	if (L->has_cframe && (!ptr_ok(top) || !rd_word(top + L->cframe_current, &top)))
		return 0;
	return ptr_ok(top) ? top : 0;
}

unsigned tbp_py_stall_stacks(void)
{
	const struct py_layout *L = tbp_py_layout_running();
	if (!L)
		return 0;
	void *(*interp_main)(void) = (void *(*)(void))tbp_real_dlsym(RTLD_DEFAULT, "PyInterpreterState_Main");
	void *(*thread_head)(void *) = (void *(*)(void *))tbp_real_dlsym(RTLD_DEFAULT, "PyInterpreterState_ThreadHead");
	int (*is_initialized)(void) = (int (*)(void))tbp_real_dlsym(RTLD_DEFAULT, "Py_IsInitialized");
	const void *code_type = tbp_real_dlsym(RTLD_DEFAULT, "PyCode_Type");
	if (!interp_main || !thread_head || !is_initialized || !code_type || !is_initialized())
		return 0;
	void *interp = interp_main();
	if (!interp)
		return 0;
	/* Newest first (PyThreadState.next is at 8 in 3.10-3.13: prev, next, interp, ...). */
	uintptr_t states[STALL_MAX_THREADS];
	unsigned n = 0;
	for (uintptr_t ts = (uintptr_t)thread_head(interp); ptr_ok(ts) && n < STALL_MAX_THREADS;) {
		states[n++] = ts;
		if (!rd_word(ts + 8, &ts))
			break;
	}
	unsigned written = 0;
	for (unsigned i = n; i-- > 0;) {
		char text[4096];
		unsigned k = n - i;   /* 1: the oldest */
		snprintf(text, sizeof text, "a stall: Python thread %u of %u%s is now in: ", k, n,
			k == 1 ? " (the oldest: the main thread, normally)" : "");
		uintptr_t frame = current_frame(L, states[i]);
		if (!frame || !describe_stack(L, code_type, frame, text, sizeof text))
			snprintf(text + strlen(text), sizeof text - strlen(text), "no Python frame (in C, or idle)");
		tbp_notice(TBP_NOTE_WARN, TBP_NOTICE_TEXT, text);
		written++;
	}
	return written;
}
