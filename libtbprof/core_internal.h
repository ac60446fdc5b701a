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
extern dev_t out_dev;
extern int out_fd;
extern int out_gone_warned;
extern bool out_gone;
extern ino_t out_ino;
extern char out_path_abs[2 * PATH_MAX + 2];
const char *out_path_shown(char *buf, size_t len);
extern char out_path[PATH_MAX];
bool out_still_ours(void);
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

#endif
