/* Bytes waiting in a pseudo-terminal pair: taken at a round and put back.
 *
 * A terminal has no peek: what waits is read (taken) and written again
 * through the pair, with the slave's termios set so that the line
 * discipline leaves the bytes as they were read.
 *
 * Output of the slave waits in the master's line discipline (raw: the
 * master's own termios cannot be set from user space) and in the buffers
 * behind it. poll() runs the discipline's pending work when it finds
 * nothing to read, so reading until poll says nothing is left takes all of
 * it. It goes back as a write to the slave with OPOST off; output
 * processing happens in the write, so nothing is left to race.
 *
 * Input the slave has not read: non-canonical, read as it is. Canonical,
 * read a line per read (a line ended by the EOF character comes without an
 * end: noted), then with ICANON off for the line not ended yet, which no
 * call shows otherwise; with nothing left in the buffer the switch changes
 * nothing of the discipline but its erase and literal-next states. It goes
 * back as a write to the master with a termios that changes no byte: input
 * mappings, signals and line editing off, the line ends the same, the EOF
 * character a byte the bytes do not hold. The discipline processes input
 * later, in its own work, under whatever termios is set then, so the
 * termios must stay until all is done: ECHO is on meanwhile (OPOST off),
 * and the echo of every byte reaching the master is the proof; ckrun reads
 * it away and compares it with what was written. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include <asm/termbits.h>

#include "launcher/ckrun/pty_queue.h"
#include "launcher/common/ck_err.h"

#define CK__PTYQ_WAIT_MS 2000

static int ck__inq(int fd)
{
	int n = 0;

	return ioctl(fd, FIONREAD, &n) < 0 ? -errno : n;
}

static void ck__nap(void)
{
	struct timespec ts = {0, 200 * 1000};

	nanosleep(&ts, NULL);
}

/* All of buf, waiting (bounded) where the pair's buffers are full. */
static int ck__write_all(int fd, const uint8_t *buf, size_t n)
{
	int waited = 0;

	for (size_t done = 0; done < n;) {
		ssize_t r = write(fd, buf + done, n - done);
		struct pollfd p = {.fd = fd, .events = POLLOUT};

		if (r > 0) {
			done += (size_t)r;
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno != EAGAIN)
			return -errno;
		if (waited >= CK__PTYQ_WAIT_MS)
			return -ETIMEDOUT;
		poll(&p, 1, 10);
		waited += 10;
	}
	return 0;
}

/* Exactly n bytes from fd (a master: n are there). */
static int ck__read_n(int fd, uint8_t *buf, size_t n)
{
	for (size_t got = 0; got < n;) {
		ssize_t r = read(fd, buf + got, n - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		got += (size_t)r;
	}
	return 0;
}

/* ---- taking ---- */

static int ck__take_out(int m, struct ck_ptyq *q)
{
	for (;;) {
		struct pollfd p = {.fd = m, .events = POLLIN};
		int n;

		if (poll(&p, 1, 0) < 0)
			return -errno;
		if (!(p.revents & POLLIN) || (n = ck__inq(m)) <= 0)
			return n < 0 ? n : 0;
		if ((uint32_t)n > CK_PTYQ_OUT_MAX - q->nout) {
			ck_err_set("more than %u bytes written by its slave wait unread", CK_PTYQ_OUT_MAX);
			return -EFBIG;
		}
		if (ck__read_n(m, q->out + q->nout, (size_t)n) < 0) {
			ck_err_set("cannot read what its slave wrote: %s", strerror(errno));
			return -EIO;
		}
		q->nout += (uint32_t)n;
	}
}

static int ck__is_eol(const struct termios2 *t, uint8_t c)
{
	return c == '\n' || (t->c_cc[VEOL] && c == t->c_cc[VEOL]) ||
	       ((t->c_lflag & IEXTEN) && t->c_cc[VEOL2] && c == t->c_cc[VEOL2]);
}

/* One read into q->in: its length, 0 at the end (EAGAIN), -errno. */
static ssize_t ck__read_in(int s, struct ck_ptyq *q)
{
	ssize_t r;

	do
		r = read(s, q->in + q->nin, CK_PTYQ_IN_MAX - q->nin);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return errno == EAGAIN ? -EAGAIN : -errno;
	return r;
}

static int ck__take_in(int s, const struct termios2 *t, struct ck_ptyq *q)
{
	struct termios2 nc = *t;
	ssize_t r;

	if (t->c_lflag & ICANON) {
		for (;;) {
			if (q->nin == CK_PTYQ_IN_MAX || q->neof == CK_PTYQ_IN_MAX)
				goto big;
			if ((r = ck__read_in(s, q)) == -EAGAIN)
				break;
			if (r < 0)
				goto fail;
			q->nin += (uint32_t)r;
			if (r == 0 || !ck__is_eol(t, q->in[q->nin - 1]))
				q->eof[q->neof++] = q->nin;
		}
		nc.c_lflag &= ~ICANON;
		nc.c_cc[VMIN] = 1;
		nc.c_cc[VTIME] = 0;
		if (ioctl(s, TCSETS2, &nc) < 0) {
			r = -errno;
			goto fail;
		}
	}
	for (;;) {
		if (q->nin == CK_PTYQ_IN_MAX)
			goto big;
		if ((r = ck__read_in(s, q)) == -EAGAIN || r == 0)
			break;
		if (r < 0)
			goto fail;
		q->nin += (uint32_t)r;
	}
	r = 0;
	goto out;
big:
	ck_err_set("more than %u bytes written by its master wait unread", CK_PTYQ_IN_MAX - 1);
	r = -EFBIG;
	goto out;
fail:
	ck_err_set("cannot read what its master wrote: %s", strerror((int)-r));
out:
	/* back to canonical with the buffer empty: a clean start */
	if ((t->c_lflag & ICANON) && ioctl(s, TCSETS2, t) < 0 && r == 0) {
		r = -errno;
		ck_err_set("cannot set its termios: %s", strerror(errno));
	}
	return (int)r;
}

int ck_ptyq_read(int m, int s, const struct termios2 *t, struct ck_ptyq *q)
{
	int r, r2;

	q->nin = q->neof = q->nout = 0;
	if ((r = ck__take_out(m, q)) == 0)
		r = ck__take_in(s, t, q);
	/* whatever was taken goes back, the round refused or not */
	r2 = ck_ptyq_put(m, s, t, q);
	if (r2 < 0 && r < 0)
		ck_err_wrap("bytes waiting in it could not all be put back either");
	return r < 0 ? r : r2;
}

/* ---- putting back ---- */

/* A byte for the EOF character that none of the bytes is (nor a line
 * end): 0 where there is none. */
static uint8_t ck__free_byte(const struct termios2 *t, const struct ck_ptyq *q)
{
	uint8_t used[256] = {0};

	for (uint32_t i = 0; i < q->nin; i++)
		used[q->in[i]] = 1;
	used[0] = used['\n'] = used[t->c_cc[VEOL]] = used[t->c_cc[VEOL2]] = 1;
	for (int c = 1; c < 256; c++)
		if (!used[c])
			return (uint8_t)c;
	return 0;
}

/* The termios under which the discipline stores input as it is read. */
static int ck__identity_termios(const struct termios2 *t, const struct ck_ptyq *q, struct termios2 *id)
{
	static const int off[] = {VINTR, VQUIT, VERASE, VKILL, VEOF, VSTART, VSTOP,
				  VSUSP, VREPRINT, VDISCARD, VWERASE, VLNEXT};

	*id = *t;
	id->c_iflag &= ~(tcflag_t)(ISTRIP | INLCR | IGNCR | ICRNL | IUCLC | PARMRK | IXANY | IMAXBEL);
	id->c_oflag &= ~(tcflag_t)OPOST;
	id->c_lflag &= ~(tcflag_t)(ISIG | XCASE | ECHONL | ECHOCTL | ECHOPRT | PENDIN);
	id->c_lflag |= ECHO;
	/* 0 disables a character: the discipline never takes NUL as one */
	for (size_t i = 0; i < sizeof(off) / sizeof(off[0]); i++)
		id->c_cc[off[i]] = 0;
	if (q->neof && !(id->c_cc[VEOF] = ck__free_byte(t, q))) {
		ck_err_set("its unread input holds every byte value and a line ended by EOF");
		return -EINVAL;
	}
	return 0;
}

static int ck__put_in(int m, int s, const struct termios2 *t, const struct ck_ptyq *q)
{
	struct termios2 id;
	uint8_t *seq = NULL, *echo = NULL;
	size_t n = 0;
	uint32_t k = 0;
	int r, waited = 0;

	if (!q->nin && !q->neof)
		return 0;
	if ((r = ck__identity_termios(t, q, &id)) < 0)
		return r;
	if (!(seq = malloc(q->nin + q->neof)) || !(echo = malloc(q->nin + 1))) {
		r = -ENOMEM;
		ck_err_set("out of memory");
		goto out;
	}
	for (uint32_t i = 0; i <= q->nin; i++) {
		for (; k < q->neof && q->eof[k] == i; k++)
			seq[n++] = id.c_cc[VEOF];
		if (i < q->nin)
			seq[n++] = q->in[i];
	}
	if (ioctl(s, TCSETS2, &id) < 0) {
		r = -errno;
		ck_err_set("cannot set its termios: %s", strerror(errno));
		goto out;
	}
	if ((r = ck__write_all(m, seq, n)) < 0) {
		ck_err_set("cannot write its unread input back: %s", strerror(-r));
		goto restore;
	}
	/* every byte processed: its echo is at the master */
	while ((r = ck__inq(m)) >= 0 && (uint32_t)r < q->nin && waited++ < CK__PTYQ_WAIT_MS * 5)
		ck__nap();
	if (r < 0 || (uint32_t)r != q->nin) {
		ck_err_set("its line discipline took back %d of %u bytes of unread input", r, q->nin);
		r = -EIO;
		goto restore;
	}
	if ((r = ck__read_n(m, echo, q->nin)) < 0 || memcmp(echo, q->in, q->nin)) {
		ck_err_set("its line discipline did not take back its unread input as it was");
		r = -EIO;
		goto restore;
	}
	r = 0;
restore:
	if (ioctl(s, TCSETS2, t) < 0 && r == 0) {
		r = -errno;
		ck_err_set("cannot set its termios: %s", strerror(errno));
	}
out:
	free(seq);
	free(echo);
	return r;
}

static int ck__put_out(int s, const struct termios2 *t, const struct ck_ptyq *q)
{
	struct termios2 raw = *t;
	int r;

	if (!q->nout)
		return 0;
	raw.c_oflag &= ~(tcflag_t)OPOST;
	if (ioctl(s, TCSETS2, &raw) < 0) {
		ck_err_set("cannot set its termios: %s", strerror(errno));
		return -errno;
	}
	if ((r = ck__write_all(s, q->out, q->nout)) < 0)
		ck_err_set("cannot write its unread output back: %s", strerror(-r));
	if (ioctl(s, TCSETS2, t) < 0 && r == 0) {
		r = -errno;
		ck_err_set("cannot set its termios: %s", strerror(errno));
	}
	return r;
}

int ck_ptyq_put(int m, int s, const struct termios2 *t, const struct ck_ptyq *q)
{
	int r = ck__put_in(m, s, t, q);

	/* the input's echo is read away before the output goes back */
	return r < 0 ? r : ck__put_out(s, t, q);
}
