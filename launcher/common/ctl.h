/* Control socket of a running job: where it lives, and the client side.
 *
 * ckrun listens on an AF_UNIX stream socket per job; a client sends one line
 * ("checkpoint" or "checkpoint-stop") and reads one line back: "ok SEQ" or
 * "error MESSAGE". The socket lives in a directory that only its owner may
 * use (0700), so the file system keeps other users out. */
#ifndef CK_CTL_H
#define CK_CTL_H

#include <stddef.h>

/* Directory of the control sockets: "$XDG_RUNTIME_DIR/ckrun" when that is
 * set, else "/tmp/ckrun-UID". Fills buf; 0 or -ENAMETOOLONG. */
int ck_ctl_dir(char *buf, size_t len);
/* Socket path of job: "DIR/JOB.sock". 0, -EINVAL (bad job name) or
 * -ENAMETOOLONG (does not fit a socket address). */
int ck_ctl_path(const char *job, char *buf, size_t len);
/* Creates the directory (0700) if needed, writes its path to dir, and
 * refuses it (-EPERM, with a message) unless it is a real directory owned
 * by the current uid with mode 0700. */
int ck_ctl_dir_prepare(char *dir, size_t len);
/* Same checks without creating anything (-ENOENT if missing). */
int ck_ctl_dir_check(const char *dir);
/* Sends cmd to job's control socket and waits for the reply line. On "ok"
 * returns 0 with the rest of the line (the sequence) in reply; on "error"
 * returns -EREMOTEIO with the message in reply and in ck_err_msg(). Returns
 * -ENOENT or -ECONNREFUSED when the job is not running. */
int ck_ctl_request(const char *job, const char *cmd, char *reply, size_t len);

#endif
