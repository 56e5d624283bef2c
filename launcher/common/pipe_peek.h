#ifndef CK_PIPE_PEEK_H
#define CK_PIPE_PEEK_H

#include <stddef.h>
#include <stdint.h>

/* Copies the avail unread bytes of the pipe open at rfd (capacity cap,
 * reachable at path for a second open) into buf and leaves them in the
 * pipe; 0 or -errno. */
int ck_pipe_peek(const char *path, int rfd, uint32_t cap, char *buf, size_t avail);

#endif
