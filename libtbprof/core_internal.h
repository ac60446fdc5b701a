/*
 * State and helpers the core's own files (config.c, ring.c, defs.c, output.c,
 * writer_thread.c, clock.c, lifecycle.c) share.  Not for hooks (interpose/)
 * nor the CUPTI/Python modules: they use core.h and core_priv.h.
 */
#ifndef TBPROF_CORE_INTERNAL_H
#define TBPROF_CORE_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core.h"
#include "core_priv.h"

extern size_t def_count;
extern size_t def_cap;
extern struct tbp_def **def_hist;
extern pthread_mutex_t def_lock;
void def_record(const struct tbp_def *d, struct tbp_record *rec);
extern size_t def_written;   /* writer: defs already in the file */
void drain_once(bool final);
extern atomic_int drain_seq;          /* futex word: bumped after each drain */
extern bool events_written;
extern int fork_child_waiting;
long futex_wait(atomic_int *addr, int expected, unsigned timeout_ms);
void futex_wake_all(atomic_int *addr);
extern pthread_mutex_t intern_lock;
extern _Atomic uint64_t lost_total_all;
int move_fd_high(int fd);
/* The output file (output.c owns its state). */
int tbp_output_open(void);          /* opens the trace's file, moved to a high descriptor: fd, or -1 (errno) */
void tbp_output_none(void);         /* no file (the flight recorder writes dumps only) */
void tbp_output_forget(void);       /* the descriptor was closed elsewhere (the writer's open failed) */
void tbp_output_after_fork(void);   /* a forked child: the parent's file is not its own */
int tbp_output_fd(void);            /* -1 when none */
const char *tbp_output_path(void);  /* as opened, for messages */
const char *tbp_output_shown(char *buf, size_t len); /* the same, absolute */
bool out_still_ours(void);          /* writer: is the descriptor still our file? */
void tbp_output_warn_gone(uint64_t dropped); /* writer: once, the program closed it */
void tbp_output_remove_if_empty(bool any_event); /* writer, at the end: no event, no file */
extern struct tbp_record process_rec;
extern bool process_written;
extern uint64_t records_written;
extern pthread_mutex_t registry_lock;
extern struct tbp_tbuf *registry;
void session_compute(void);
extern char session_text[128];
extern atomic_int signal_pending;     /* signal number whose handler waits */
void tbp_build_process_record(void);
pid_t tbp_gettid(void);
bool tbp_is_launcher_agent(void);
int tbp_open_output(void);
void tbp_register_atfork(void);
void tbp_start_trace_all(void);
void tbp_tbuf_retire(void *arg);
void *tbp_writer_main(void *arg);
extern pthread_key_t tbuf_key;
extern bool tsc_wanted;      /* TBPROF_TSC (default 1) */
extern atomic_int writer_exited;      /* futex word: 1 when finished */
extern atomic_int writer_stop;        /* 1: final drain and exit */
extern pthread_t writer_thread;
extern atomic_int writer_wake;      /* futex word: 1 = work requested */
extern struct tbp_writer *writer;
void tbp_announce_thread(struct tbp_tbuf *b);
/* Would a whole record put in b's ring now be dropped (growth due at this head included)? */
bool tbp_ring_would_drop(struct tbp_tbuf *b);
/* clock.c: the writer re-reads the TSC/monotonic pair between drains. */
void tsc_recalibrate(void);
/* writer_thread.c: held while the writer drains; taken first across fork. */
extern pthread_mutex_t writer_busy_lock;
/* writer_thread.c: 1 once the writer thread runs our code (its start-up is over). */
extern atomic_int writer_running;

/* ------------------------------------------------------------ captures (capture.c, lifecycle.c)
 * Under TBPROF_ON_DEMAND the process is armed: tbp_active stays 0 (every hook returns at its first
 * test, no thread writes, no file) until a capture begins; tbp_capture_begin starts the trace as a
 * hook's first call would, into its own file, and tbp_capture_end finishes that file (GPU records
 * flushed, END, seek table) and arms the process again.  Definitions are kept across captures and
 * all of them are written into each capture's file, so each is a complete trace. */
void tbp_capture_arm(void);                       /* capture.c: from the constructor */
int tbp_capture_begin(const char *path);          /* 0, or -1 (a line on stderr says why) */
/* Ends the capture in progress: 1 written, 0 no event (no file left), -1 none in progress. */
int tbp_capture_end(void);
extern char capture_out[PATH_MAX];  /* the capture's file; "" outside captures (output.c) */
extern unsigned capture_gen;        /* captures begun so far: THREAD records per file (writer) */
extern atomic_int capture_closing;  /* ending: GPU records still flow in, hooks no longer record */
/* tbprof_marker's steps, before its record (a capture may begin) and after it (one may end). */
void tbp_capture_marker_before(int kind);
void tbp_capture_marker_after(int kind);
/* "trace.zst" -> "trace.capture<n>.zst" ("trace.<tag>.capture<n>.zst" with a tag), from TBPROF_OUT
 * as the process's trace would be named (output.c). */
void tbp_capture_default_path(char *buf, size_t cap, const char *word, unsigned n, const char *tag);
/* "x.zst" -> "x.<tag>.zst" */
void tbp_capture_tagged_path(char *buf, size_t cap, const char *path, const char *tag);
void tbp_capture_disarm(void);   /* exit, exec: no more requests for this image */
void tbp_capture_fork_child(void);
void tbp_capture_exit_answer(void);   /* under capture_lock, after the exit finished a capture */
extern pthread_mutex_t capture_lock;  /* begin, end and exit, one at a time (lifecycle.c) */
extern uint32_t trace_features;       /* the header's features, decided at start (lifecycle.c) */
/* Answers request `id` of `tbprof capture` (capture.c). */
void tbp_capture_answer(unsigned long long id, const char *text);

/* ------------------------------------------------------------ flight recorder (flight.c)
 * TBPROF_FLIGHT: the writer thread keeps the records it drains in one bounded ring in memory instead
 * of writing them, and writes the last TBPROF_FLIGHT seconds of them as a complete trace when asked:
 * `tbprof capture PID`, a fatal signal, a slow step, a stall. */
void tbp_flight_append(const struct tbp_record *r, size_t n);    /* writer thread */
/* Asks the writer for a dump (NULL path: the default name; id: the request to answer; why: the
 * NOTICE the dump carries).  Not from a signal handler. */
void tbp_flight_request(const char *path, unsigned long long id, const char *why);
/* Writer thread, before each drain snapshots the rings: takes the dump asked for so far, so that the
 * dump holds what the asking thread recorded before it asked. */
void tbp_flight_claim(void);
/* Writer thread, after each drain: the dump claimed before it; with `final` after a fatal signal, that one. */
void tbp_flight_service(bool final);
/* Step ends (tbprof_marker), for --flight-slow and --flight-stall. */
void tbp_flight_step_mark(int kind);
void tbp_flight_watch(void);   /* control thread, every 100 ms: --flight-stall */
/* python_stall.c: one NOTICE per Python thread saying where it is now (a stall dump's); how many. */
unsigned tbp_py_stall_stacks(void);
void tbp_flight_fork_child(void);   /* the parent's records and requests are the parent's */

#endif
