#ifndef CK_CTLSRV_H
#define CK_CTLSRV_H
#include <stddef.h>
int ck_ctlsrv_open(const char *job, char *path, size_t len);
/* Accepts one client of our uid and reads its command line; returns the
 * connection to answer with ck_ctlsrv_reply. */
int ck_ctlsrv_accept(int lfd, char *cmd, size_t len);
void ck_ctlsrv_reply(int fd, const char *line);
#endif
