/*
 * Python module (python_module.h): where this interpreter keeps library
 * code, asked from a pending call and written as PY_LIB records.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "python_module.h"

/* ------------------------------------------------ library directories
 *
 * Where this interpreter keeps library code, in its own words, for the
 * analyzer to tell the user's frames from the libraries' by where a file
 * lies instead of by words in its path (PY_LIB records, doc/trace-format.md):
 * sysconfig's stdlib/platstdlib/purelib/platlib, site.getsitepackages(), the
 * user site, the torch package's directory (a source tree's too), and the
 * file name frozen modules carry.  Asked from a pending call: the main thread
 * between two bytecodes, with the GIL, where a signal handler's Python runs;
 * never from a hook, whose caller (torch's C++) may hold locks that Python
 * run there could need.  The snippet reads modules already imported and
 * imports nothing, so the program's modules stay as they were; the hook
 * steps aside while it runs, so it leaves no spans.  Asked again
 * (lib_paths_again) until site has finished and torch is imported: a trace
 * started with the interpreter asks before either.  What comes too late
 * (torch imported after the last ask, 10 s in) is missing: the analyzer
 * then classifies those files by the other directories. */
static const char lib_snippet[] =
	"def _tbprof_lib_paths():\n"
	"    m = __import__('sys').modules\n"
	"    out = []\n"
	"    def utf8(p):\n"
	"        try:\n"
	"            return isinstance(p, str) and p != '' and bool(p.encode('utf-8'))\n"
	"        except Exception:\n"
	"            return False\n"
	"    def add(role, p, real=True):\n"
	"        if utf8(p):\n"
	"            out.append('%d\\t%s' % (role, p))\n"
	"            try:\n"
	"                r = m['os'].path.realpath(p) if real else p\n"
	"                if r != p and utf8(r):\n"
	"                    out.append('%d\\t%s' % (role, r))\n"
	"            except Exception:\n"
	"                pass\n"
	"    sc = m.get('sysconfig')\n"
	"    if sc is not None:\n"
	"        try:\n"
	"            paths = sc.get_paths()\n"
	"            for role, key in ((1, 'stdlib'), (2, 'platstdlib'), (3, 'purelib'), (4, 'platlib')):\n"
	"                add(role, paths.get(key))\n"
	"        except Exception:\n"
	"            pass\n"
	"    else:\n"
	"        try:\n"
	"            add(1, m['os'].path.dirname(m['os'].__file__))\n"
	"        except Exception:\n"
	"            pass\n"
	"    site = m.get('site')\n"
	"    if site is not None:\n"
	"        try:\n"
	"            for p in site.getsitepackages():\n"
	"                add(5, p)\n"
	"        except Exception:\n"
	"            pass\n"
	"        try:\n"
	"            add(6, site.getusersitepackages())\n"
	"        except Exception:\n"
	"            pass\n"
	"    torch = m.get('torch')\n"
	"    tpath = list(getattr(torch, '__path__', None) or ()) if torch is not None else []\n"
	"    for p in tpath:\n"
	"        add(7, p)\n"
	"    try:\n"
	"        boot = m['_frozen_importlib']\n"
	"        f = boot._find_and_load.__code__.co_filename\n"
	"        i = f.find(boot.__name__)\n"
	"        if i > 0:\n"
	"            add(8, f[:i], False)\n"
	"    except Exception:\n"
	"        pass\n"
	"    # site sets help() once it has read its .pth files; torch is in\n"
	"    # sys.modules while it is still being imported (and imports sysconfig)\n"
	"    done = ((site is None or hasattr(m['builtins'], 'help')) and bool(tpath) and sc is not None\n"
	"            and not getattr(getattr(torch, '__spec__', None), '_initializing', False))\n"
	"    return '%d\\n' % done + '\\n'.join(out)\n"
	"def _tbprof_safe():\n"
	"    try:\n"
	"        return _tbprof_lib_paths()\n"
	"    except Exception:\n"
	"        return '0'\n"
	"out = _tbprof_safe()\n";

static _Atomic int lib_paths_done;  /* site done and torch seen: nothing more to ask */
_Atomic uint64_t lib_paths_next; /* tbp_now() of the next ask from a span, 0: not yet asked */
static unsigned lib_paths_asks;

#define LIB_PATHS_MAX 64
static struct {
	uint64_t role, path;
} lib_emitted[LIB_PATHS_MAX];
static unsigned n_lib_emitted;

/* "ROLE\tPATH" lines into PY_LIB records, each (role, path) once. */
static void lib_paths_emit(const char *text, size_t len)
{
	const char *p = text, *end = text + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *line_end = nl ? nl : end;
		const char *tab = memchr(p, '\t', (size_t)(line_end - p));
		if (tab && tab > p && tab + 1 < line_end) {
			uint64_t role = strtoull(p, NULL, 10);
			uint64_t id = tbp_intern_string(tab + 1, (size_t)(line_end - tab - 1));
			unsigned i = 0;
			while (i < n_lib_emitted && (lib_emitted[i].role != role || lib_emitted[i].path != id))
				i++;
			if (id && i == n_lib_emitted && n_lib_emitted < LIB_PATHS_MAX) {
				lib_emitted[n_lib_emitted].role = role;
				lib_emitted[n_lib_emitted++].path = id;
				struct tbp_record rec = {.kind = TBP_K_PY_LIB, .stream_kind = TBP_STREAM_DEFS, .ts = tbp_now()};
				rec.u.py_lib.role = role;
				rec.u.py_lib.path = id;
				tbp_emit_def(&rec);
			}
		}
		p = line_end + 1;
	}
}

/* The interpreter has begun to shut down (Py_IsFinalizing, 3.13; before,
 * _Py_IsFinalizing): Python run then may meet modules already torn down. */
static bool interpreter_finalizing(void)
{
	static int (*is_finalizing)(void);
	static bool resolved;
	if (!resolved) {
		is_finalizing = (int (*)(void))tbp_real_dlsym(RTLD_DEFAULT, "Py_IsFinalizing");
		if (!is_finalizing)
			is_finalizing = (int (*)(void))tbp_real_dlsym(RTLD_DEFAULT, "_Py_IsFinalizing");
		resolved = true;
	}
	return !is_finalizing || is_finalizing();
}

/* A pending call: the main thread, GIL held, between two bytecodes. */
static int lib_paths_record(void *unused)
{
	(void)unused;
	static struct {
		void *(*dict_new)(void);
		void *(*builtins)(void);
		int (*dict_set)(void *, const char *, void *);
		void *(*dict_get)(void *, const char *);
		void *(*run)(const char *, int, void *, void *, void *);
		const char *(*utf8)(void *, ssize_t *);
		void (*decref)(void *);
		void *(*err_occurred)(void);
		void (*err_clear)(void);
		bool resolved, ok;
	} c;
	if (!c.resolved) {
		c.resolved = true;
		c.dict_new = (void *(*)(void))tbp_real_dlsym(RTLD_DEFAULT, "PyDict_New");
		c.builtins = (void *(*)(void))tbp_real_dlsym(RTLD_DEFAULT, "PyEval_GetBuiltins");
		c.dict_set = (int (*)(void *, const char *, void *))tbp_real_dlsym(RTLD_DEFAULT, "PyDict_SetItemString");
		c.dict_get = (void *(*)(void *, const char *))tbp_real_dlsym(RTLD_DEFAULT, "PyDict_GetItemString");
		c.run = (void *(*)(const char *, int, void *, void *, void *))tbp_real_dlsym(RTLD_DEFAULT, "PyRun_StringFlags");
		c.utf8 = (const char *(*)(void *, ssize_t *))tbp_real_dlsym(RTLD_DEFAULT, "PyUnicode_AsUTF8AndSize");
		c.decref = (void (*)(void *))tbp_real_dlsym(RTLD_DEFAULT, "Py_DecRef");
		c.err_occurred = (void *(*)(void))tbp_real_dlsym(RTLD_DEFAULT, "PyErr_Occurred");
		c.err_clear = (void (*)(void))tbp_real_dlsym(RTLD_DEFAULT, "PyErr_Clear");
		c.ok = c.dict_new && c.builtins && c.dict_set && c.dict_get && c.run && c.utf8 && c.decref &&
		       c.err_occurred && c.err_clear;
	}
	/* An exception on its way is the program's: leave it alone; an
	 * interpreter being torn down has nothing left to ask. */
	if (!c.ok || atomic_load(&lib_paths_done) || !TBP_ACTIVE() || interpreter_finalizing() || c.err_occurred())
		return 0;
	void *globals = c.dict_new(), *builtins = c.builtins();
	if (!globals || !builtins || c.dict_set(globals, "__builtins__", builtins)) {
		if (globals)
			c.decref(globals);
		c.err_clear();
		return 0;
	}
	void *interp = py.interp_main ? py.interp_main() : NULL;
	bool aside = false;
	if (!hook_suspended && interp && prev_eval && py.get_eval(interp) == (eval_frame_fn)tbp_eval_frame) {
		py.set_eval(interp, prev_eval);
		aside = true;
	}
	enum { PY_FILE_INPUT = 257 };
	void *result = c.run(lib_snippet, PY_FILE_INPUT, globals, globals, NULL);
	if (aside && py.get_eval(interp) == prev_eval)
		py.set_eval(interp, (eval_frame_fn)tbp_eval_frame);
	if (!result && c.err_occurred()) {
		/* Not one of ours (the snippet catches every Exception): the
		 * program's KeyboardInterrupt or SystemExit, raised by a signal
		 * handler while the snippet ran.  It goes on into the program, as
		 * it would have at its next bytecode. */
		c.decref(globals);
		return -1;
	}
	if (result) {
		c.decref(result);
		void *out = c.dict_get(globals, "out"); /* borrowed */
		ssize_t n = 0;
		const char *text = out ? c.utf8(out, &n) : NULL;
		/* (a path the file system names in bytes that are not UTF-8
		 * comes back with lone surrogates; the snippet leaves those out,
		 * and an error here must not reach the program's next bytecode) */
		if (!text && c.err_occurred())
			c.err_clear();
		if (text && n > 0) {
			bool entered = tbp_guard_enter();
			const char *nl = memchr(text, '\n', (size_t)n);
			if (nl)
				lib_paths_emit(nl + 1, (size_t)(text + n - nl - 1));
			if (text[0] == '1')
				atomic_store(&lib_paths_done, 1);
			if (entered)
				tbp_guard_leave();
		}
	}
	c.decref(globals);
	return 0;
}

void lib_paths_ask(void)
{
	if (py.add_pending_call && !atomic_load(&lib_paths_done) && !interpreter_finalizing())
		py.add_pending_call(lib_paths_record, NULL);
}

/* The first answer may come while site still reads its .pth files and
 * before torch is imported (a trace started with the interpreter): asked
 * again, about 0.2, 1, 3 and 10 s later, from a span as it is recorded: a
 * Python thread, so the interpreter is alive (a thread of ours asking on a
 * timer could ask one that is being torn down).  Each answer adds what is
 * new. */
void lib_paths_again(uint64_t now)
{
	/* (the first again-ask is set up at install: 0.2 s; then 1, 3, 10 s) */
	static const uint64_t after_ns[] = {800000000ull, 2000000000ull, 7000000000ull};
	uint64_t next = atomic_load_explicit(&lib_paths_next, memory_order_relaxed);
	if (TBP_LIKELY(!next || now < next) || atomic_load_explicit(&lib_paths_done, memory_order_relaxed))
		return;
	if (!atomic_compare_exchange_strong(&lib_paths_next, &next, 0))
		return;
	unsigned i = __atomic_fetch_add(&lib_paths_asks, 1, __ATOMIC_RELAXED);
	if (i < sizeof after_ns / sizeof after_ns[0])
		atomic_store(&lib_paths_next, now + after_ns[i]);
	lib_paths_ask();
}
