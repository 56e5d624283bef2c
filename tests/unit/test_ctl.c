/* Control socket client against a one-shot fake server. */
#include <errno.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "launcher/common/ck_err.h"
#include "launcher/common/ctl.h"
#include "tests/unit/tmpdir.h"
#include "tests/unit/unit.h"

struct srv {
	int fd;
	const char *answer;
	char got[64];
};

static void *serve(void *arg)
{
	struct srv *s = arg;
	int c = accept(s->fd, NULL, NULL);
	ssize_t n;

	if (c < 0)
		return NULL;
	n = recv(c, s->got, sizeof(s->got) - 1, 0);
	if (n > 0)
		s->got[n] = 0;
	send(c, s->answer, strlen(s->answer), MSG_NOSIGNAL);
	close(c);
	return NULL;
}

static int one_request(const char *answer, char *reply, size_t len, char *got)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct srv s = {.answer = answer};
	pthread_t t;
	int rc;

	ck_ctl_path("job1", sa.sun_path, sizeof(sa.sun_path));
	unlink(sa.sun_path);
	s.fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (bind(s.fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s.fd, 1) < 0)
		return -999;
	pthread_create(&t, NULL, serve, &s);
	rc = ck_ctl_request("job1", "checkpoint", reply, len);
	pthread_join(t, NULL);
	close(s.fd);
	unlink(sa.sun_path);
	strcpy(got, s.got);
	return rc;
}

void ck_unit_run(void)
{
	char *tmp = ck_unit_tmpdir(), dir[256], path[256], want[300], reply[64], got[64];

	setenv("XDG_RUNTIME_DIR", tmp, 1);
	CHECK_EQ_INT(ck_ctl_path("job1", path, sizeof(path)), 0);
	snprintf(want, sizeof(want), "%s/ckrun/job1.sock", tmp);
	CHECK_EQ_STR(path, want);
	CHECK_EQ_INT(ck_ctl_path("../x", path, sizeof(path)), -EINVAL);

	/* Not running: no directory, then no socket. */
	CHECK_EQ_INT(ck_ctl_request("job1", "checkpoint", reply, sizeof(reply)), -ENOENT);
	CHECK(strstr(ck_err_msg(), "not running") != NULL);
	CHECK_EQ_INT(ck_ctl_dir_prepare(dir, sizeof(dir)), 0);
	snprintf(want, sizeof(want), "%s/ckrun", tmp);
	CHECK_EQ_STR(dir, want);
	CHECK_EQ_INT(ck_ctl_request("job1", "checkpoint", reply, sizeof(reply)), -ENOENT);

	CHECK_EQ_INT(one_request("ok 12\n", reply, sizeof(reply), got), 0);
	CHECK_EQ_STR(reply, "12");
	CHECK_EQ_STR(got, "checkpoint\n");
	CHECK_EQ_INT(one_request("error store full\n", reply, sizeof(reply), got), -EREMOTEIO);
	CHECK_EQ_STR(reply, "store full");
	CHECK(strstr(ck_err_msg(), "store full") != NULL);
	CHECK_EQ_INT(one_request("bogus\n", reply, sizeof(reply), got), -EPROTO);
	CHECK_EQ_INT(one_request("", reply, sizeof(reply), got), -EPROTO);
	CHECK_EQ_INT(ck_ctl_request("job1", "two\nlines", reply, sizeof(reply)), -EINVAL);

	/* A directory others can enter is refused. */
	chmod(dir, 0755);
	CHECK_EQ_INT(ck_ctl_dir_prepare(dir, sizeof(dir)), -EPERM);
	CHECK(strstr(ck_err_msg(), "0755") != NULL);
	CHECK_EQ_INT(ck_ctl_request("job1", "checkpoint", reply, sizeof(reply)), -EPERM);
	chmod(dir, 0700);

	/* Without XDG_RUNTIME_DIR: /tmp/ckrun-UID. */
	unsetenv("XDG_RUNTIME_DIR");
	CHECK_EQ_INT(ck_ctl_path("j", path, sizeof(path)), 0);
	snprintf(want, sizeof(want), "/tmp/ckrun-%u/j.sock", (unsigned)getuid());
	CHECK_EQ_STR(path, want);
	ck_unit_rmtree(tmp);
}
