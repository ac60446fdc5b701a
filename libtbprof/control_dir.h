/*
 * The private directory through which `tbprof capture` (launcher/tbprof.c) asks a process armed by
 * `tbprof record --on-demand` or `--flight` (libtbprof/capture.c) for a capture.  One definition for
 * both sides: the directory of user `uid` is /run/user/UID/tbprof when /run/user/UID is that user's
 * own private directory (systemd's runtime directory), else /tmp/tbprof-UID.  Either must be a real
 * directory (not a symlink), owned by `uid`, with no access for group or others: a name in /tmp that
 * another user created first is refused, never used.  Only its user (or root) can then put a request
 * in it or read what is in it.
 *
 * Files in it, per armed process PID:
 *   PID.armed        written by the process: its start time (clock ticks since boot, /proc/PID/stat
 *                    field 22), so a reused pid is not taken for it
 *   PID.req          a request (written to .PID.req.tmp, then renamed): lines "id N", "for_ms N",
 *                    "steps N", "out PATH", "multi 1"
 *   PID.cancel       the requester gave up: end the capture now
 *   PID.N.done       the answer to request N: "ok PATH", "empty" or "error MESSAGE"
 */
#ifndef TBPROF_CONTROL_DIR_H
#define TBPROF_CONTROL_DIR_H

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Is `path` a directory (not a link) of `uid` that nobody else may enter? */
static inline bool tbp_control_dir_private(const char *path, uid_t uid)
{
	struct stat st;
	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == uid && !(st.st_mode & 077);
}

/* The directory of `uid` into buf; with `create`, made (0700) when missing.  0, or -1 with errno:
 * ENOENT (missing, not created), EPERM (it exists but is not private to uid: another user made it,
 * or its mode lets others in). */
static inline int tbp_control_dir(uid_t uid, bool create, char *buf, size_t cap)
{
	char run[64];
	snprintf(run, sizeof run, "/run/user/%u", (unsigned)uid);
	if (tbp_control_dir_private(run, uid))
		snprintf(buf, cap, "%s/tbprof", run);
	else
		snprintf(buf, cap, "/tmp/tbprof-%u", (unsigned)uid);
	if (create && mkdir(buf, 0700) != 0 && errno != EEXIST)
		return -1;
	struct stat st;
	if (lstat(buf, &st) != 0) {
		errno = ENOENT;
		return -1;
	}
	if (!tbp_control_dir_private(buf, uid)) {
		errno = EPERM;
		return -1;
	}
	return 0;
}

#endif
