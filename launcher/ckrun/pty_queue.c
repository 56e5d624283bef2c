/* Bytes waiting in a pseudo-terminal pair: taken at a round and put back.
 *
 * A terminal has no peek: what waits is read (taken) and written again
 * through the pair, with the slave's termios set so that the line
 * discipline stores the bytes as they were read.
 *
 * Output of the slave waits in the master's line discipline (raw: the
 * master's own termios cannot be set from user space) and in the buffers
 * behind it. poll() runs the discipline's pending work when it finds
 * nothing to read, so reading until poll says nothing is left takes all of
 * it. It goes back as a write to the slave with OPOST off; output
 * processing happens in the write, so nothing is left to race.
 *
 * Input the slave has not read: non-canonical, read as it is. Canonical,
 * read a line per read (a read that ends without a line end was ended by
 * the EOF character), then with ICANON off the line not ended yet, which
 * no call shows otherwise; with nothing left in the buffer the switch
 * changes nothing of the discipline but its literal-next and erase states.
 * Reading to the end also runs the discipline on what waited behind a full
 * buffer, under the job's own termios, as the job's reads would have.
 *
 * It goes back as a write to the master under an identity termios: input
 * mappings and signals off, every editing and flow character disabled (0,
 * which the discipline never takes for one), the line ends as they were;
 * in canonical mode a literal-next, an EOF and an erase character of
 * ckrun's choice, the first escaping every data byte that is a line end
 * (other than a line's own end) or one of the three. The discipline
 * processes input later, in its own work item, under whatever termios is
 * set by then, so the identity must stay until every byte is processed:
 * ECHO is on meanwhile (OPOST, ECHOCTL, ECHOE off), each data byte's echo
 * reaches the master, and in canonical mode a last byte of ckrun's and an
 * erase of it (their echo, the byte and the erase character) prove that an
 * EOF at the end was processed too. ckrun waits for all of it, reads it
 * away and compares it with what it expects, before the saved termios and
 * then the output go back. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
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

int ck_ptyq_alloc(struct ck_ptyq *q)
{
	memset(q, 0, sizeof(*q));
	q->in = malloc(CK_PTYQ_IN_MAX);
	q->out = malloc(CK_PTYQ_OUT_MAX);
	if (q->in && q->out)
		return 0;
	ck_ptyq_free(q);
	ck_err_set("out of memory");
	return -ENOMEM;
}

void ck_ptyq_free(struct ck_ptyq *q)
{
	free(q->in);
	free(q->out);
	q->in = q->out = NULL;
}

/* Discards what waits at the master (the echo of a put-back that failed). */
static void ck__drain(int m)
{
	uint8_t buf[4096];
	struct pollfd p = {.fd = m, .events = POLLIN};

	while (poll(&p, 1, 0) == 1 && (p.revents & POLLIN) && read(m, buf, sizeof(buf)) > 0)
		;
}

/* ---- taking ---- */

static int ck__take_out(int m, struct ck_ptyq *q)
{
	for (;;) {
		struct pollfd p = {.fd = m, .events = POLLIN};
		ssize_t r;

		if (poll(&p, 1, 0) < 0)
			return -errno;
		if (!(p.revents & POLLIN))
			return 0;
		if (q->nout == CK_PTYQ_OUT_MAX) {
			ck_err_set("more than %u bytes written by its slave wait unread", CK_PTYQ_OUT_MAX);
			return -EFBIG;
		}
		do
			r = read(m, q->out + q->nout, CK_PTYQ_OUT_MAX - q->nout);
		while (r < 0 && errno == EINTR);
		if (r <= 0) {
			if (r < 0 && errno == EAGAIN)
				continue;
			ck_err_set("cannot read what its slave wrote: %s", r < 0 ? strerror(errno) : "end of file");
			return r < 0 ? -errno : -EIO;
		}
		q->nout += (uint32_t)r;
	}
}

/* The line ends of termios t: '\n', VEOL, VEOL2 with IEXTEN. */
static int ck__is_eol(const struct termios2 *t, uint8_t c)
{
	return c == '\n' || (t->c_cc[VEOL] && c == t->c_cc[VEOL]) ||
	       ((t->c_lflag & IEXTEN) && t->c_cc[VEOL2] && c == t->c_cc[VEOL2]);
}

/* The characters ckrun's put-back uses in canonical mode: none a line end
 * of t, all ASCII (an IUTF8 erase takes one byte). */
static void ck__pick_chars(const struct termios2 *t, uint8_t out[4])
{
	int n = 0;

	for (int c = 1; c < 0x7f && n < 4; c++)
		if (!ck__is_eol(t, (uint8_t)c) && c != t->c_cc[VEOL2])
			out[n++] = (uint8_t)c;
}

static int ck__escaped(const struct ck_ptyq *q, const struct termios2 *t, uint8_t b)
{
	return ck__is_eol(t, b) || b == q->lnext || b == q->eofc || b == q->erase;
}

/* One read of the slave into buf: its length, -EAGAIN at the end, -errno. */
static ssize_t ck__read_slave(int s, uint8_t *buf, size_t n)
{
	ssize_t r;

	do
		r = read(s, buf, n);
	while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : r;
}

static int ck__take_in(int s, const struct termios2 *t, struct ck_ptyq *q)
{
	struct termios2 nc = *t;
	uint8_t line[4096], ch[4];
	int canon = !!(t->c_lflag & ICANON);
	ssize_t r;

	if (!canon) {
		while (q->nin < CK_PTYQ_IN_MAX) {
			if ((r = ck__read_slave(s, q->in + q->nin, CK_PTYQ_IN_MAX - q->nin)) == -EAGAIN || r == 0)
				return 0;
			if (r < 0)
				goto fail;
			q->nin += (uint32_t)r;
			q->ndata += (uint32_t)r;
			q->nplaces += (uint32_t)r;
		}
		goto big;
	}
	ck__pick_chars(t, ch);
	q->lnext = ch[0];
	q->eofc = ch[1];
	q->erase = ch[2];
	/* whole lines, one a read (a line holds at most 4095 bytes) */
	for (;;) {
		if (CK_PTYQ_IN_MAX - q->nin < 2 * sizeof(line) + 1)
			goto big;
		if ((r = ck__read_slave(s, line, sizeof(line))) == -EAGAIN)
			break;
		if (r < 0)
			goto fail;
		for (ssize_t j = 0; j < r; j++) {
			if (ck__escaped(q, t, line[j]) && !(j == r - 1 && ck__is_eol(t, line[j])))
				q->in[q->nin++] = q->lnext;
			q->in[q->nin++] = line[j];
		}
		q->ndata += (uint32_t)r;
		q->nplaces += (uint32_t)r;
		if (r == 0 || !ck__is_eol(t, line[r - 1])) {
			q->in[q->nin++] = q->eofc;
			q->nplaces++;
		}
	}
	/* the line not ended yet: what is left, read with ICANON off */
	nc.c_lflag &= ~(tcflag_t)ICANON;
	nc.c_cc[VMIN] = 1;
	nc.c_cc[VTIME] = 0;
	if (ioctl(s, TCSETS2, &nc) < 0) {
		r = -errno;
		goto fail;
	}
	for (;;) {
		if (CK_PTYQ_IN_MAX - q->nin < 2 * sizeof(line)) {
			r = -EFBIG;
			break;
		}
		if ((r = ck__read_slave(s, line, sizeof(line))) == -EAGAIN || r == 0) {
			r = 0;
			break;
		}
		if (r < 0)
			break;
		for (ssize_t j = 0; j < r; j++) {
			if (ck__escaped(q, t, line[j]))
				q->in[q->nin++] = q->lnext;
			q->in[q->nin++] = line[j];
		}
		q->ndata += (uint32_t)r;
		q->nplaces += (uint32_t)r;
	}
	/* back to canonical with the buffer empty: a clean start */
	if (ioctl(s, TCSETS2, t) < 0 && r == 0)
		r = -errno;
	if (r == -EFBIG)
		goto big;
	if (r < 0)
		goto fail;
	return 0;
big:
	ck_err_set("more than %u bytes written by its master wait unread", CK_PTYQ_IN_MAX / 2);
	return -EFBIG;
fail:
	ck_err_set("cannot read what its master wrote: %s", strerror((int)-r));
	return (int)r;
}

int ck_ptyq_read(int m, int s, const struct termios2 *t, struct ck_ptyq *q)
{
	int r, r2, fl = fcntl(m, F_GETFL);

	q->nin = q->nout = q->ndata = q->nplaces = 0;
	q->lnext = q->eofc = q->erase = 0;
	/* the job's description, non-blocking while the job is parked: a
	 * write to a full pair must not hold the round */
	if (fl < 0 || fcntl(m, F_SETFL, fl | O_NONBLOCK) < 0) {
		ck_err_set("cannot set its flags: %s", strerror(errno));
		return -errno;
	}
	if ((r = ck__take_out(m, q)) == 0 && (r = ck__take_in(s, t, q)) == 0 &&
	    q->nplaces + 2 > CK_PTYQ_IN_FIT) {
		/* it came partly from behind a full line buffer: going back, it
		 * would wait there unprocessed, to be processed again */
		ck_err_set("%u bytes written by its master wait unread, more than a checkpoint puts back exactly "
			   "(its line buffer holds 4095)",
			   q->ndata);
		r = -EFBIG;
	}
	/* whatever was taken goes back, the round refused or not */
	r2 = ck_ptyq_put(m, s, t, q);
	if (r2 < 0 && r < 0)
		ck_err_wrap("bytes waiting in it could not all be put back either");
	fcntl(m, F_SETFL, fl);
	return r < 0 ? r : r2;
}

/* ---- putting back ---- */

/* The termios under which the discipline stores input as it was read. */
static void ck__identity_termios(const struct termios2 *t, const struct ck_ptyq *q, struct termios2 *id)
{
	static const int off[] = {VINTR, VQUIT, VERASE, VKILL, VEOF, VSTART, VSTOP,
				  VSUSP, VREPRINT, VDISCARD, VWERASE, VLNEXT};

	*id = *t;
	id->c_iflag &= ~(tcflag_t)(ISTRIP | INLCR | IGNCR | ICRNL | IUCLC | PARMRK | IXANY | IMAXBEL);
	id->c_oflag &= ~(tcflag_t)OPOST;
	id->c_lflag &= ~(tcflag_t)(ISIG | XCASE | ECHONL | ECHOCTL | ECHOPRT | ECHOE | ECHOK | ECHOKE | PENDIN);
	id->c_lflag |= ECHO;
	/* 0 disables a character: the discipline never takes NUL as one */
	for (size_t i = 0; i < sizeof(off) / sizeof(off[0]); i++)
		id->c_cc[off[i]] = 0;
	if (t->c_lflag & ICANON) {
		/* the literal-next character needs IEXTEN, which makes VEOL2 a
		 * line end: it is one only where it was */
		if (!(t->c_lflag & IEXTEN))
			id->c_cc[VEOL2] = 0;
		id->c_lflag |= IEXTEN;
		id->c_cc[VLNEXT] = q->lnext;
		id->c_cc[VEOF] = q->eofc;
		id->c_cc[VERASE] = q->erase;
	}
}

/* The echo the put-back of q must bring to the master; its length. */
static size_t ck__expected_echo(const struct termios2 *t, const struct ck_ptyq *q, uint8_t *echo, uint8_t last)
{
	size_t n = 0;

	if (!(t->c_lflag & ICANON)) {
		memcpy(echo, q->in, q->nin);
		return q->nin;
	}
	for (uint32_t i = 0; i < q->nin; i++) {
		if (q->in[i] == q->lnext && i + 1 < q->nin)
			echo[n++] = q->in[++i];
		else if (q->in[i] != q->eofc)
			echo[n++] = q->in[i];
	}
	echo[n++] = last;
	echo[n++] = q->erase;
	return n;
}

static int ck__put_in(int m, int s, const struct termios2 *t, const struct ck_ptyq *q)
{
	struct termios2 id;
	uint8_t *echo = NULL, *got = NULL, tail[2] = {0, 0};
	size_t ne;
	int r, waited = 0, canon = !!(t->c_lflag & ICANON);

	if (!q->nin)
		return 0;
	if (canon && (!q->lnext || !q->eofc || !q->erase)) {
		ck_err_set("its saved input names no escape characters");
		return -EINVAL;
	}
	/* the last byte: one the discipline takes as plain data */
	for (int c = 'a'; canon && c <= 'z' && !tail[0]; c++)
		if (!ck__is_eol(t, (uint8_t)c) && c != t->c_cc[VEOL2] && c != q->lnext && c != q->eofc && c != q->erase)
			tail[0] = (uint8_t)c;
	tail[1] = q->erase;
	if (!(echo = malloc(q->nin + 2)) || !(got = malloc(q->nin + 2))) {
		r = -ENOMEM;
		ck_err_set("out of memory");
		goto out;
	}
	ne = ck__expected_echo(t, q, echo, tail[0]);
	ck__identity_termios(t, q, &id);
	if (ioctl(s, TCSETS2, &id) < 0) {
		r = -errno;
		ck_err_set("cannot set its termios: %s", strerror(errno));
		goto out;
	}
	if ((r = ck__write_all(m, q->in, q->nin)) < 0 || (canon && (r = ck__write_all(m, tail, 2)) < 0)) {
		ck_err_set("cannot write its unread input back: %s", strerror(-r));
		goto restore;
	}
	/* every byte processed: its echo, and the last one's, at the master */
	while ((r = ck__inq(m)) >= 0 && (size_t)r < ne && waited++ < CK__PTYQ_WAIT_MS * 5)
		ck__nap();
	if (r < 0 || (size_t)r != ne) {
		ck_err_set("its line discipline took back %d of %zu bytes of unread input", r, ne);
		r = -EIO;
		goto restore;
	}
	if ((r = ck__read_n(m, got, ne)) < 0 || memcmp(got, echo, ne)) {
		ck_err_set("its line discipline did not take back its unread input as it was");
		r = -EIO;
		goto restore;
	}
	r = 0;
restore:
	if (r < 0)
		ck__drain(m); /* what echo came: not the slave's output */
	if (ioctl(s, TCSETS2, t) < 0 && r == 0) {
		r = -errno;
		ck_err_set("cannot set its termios: %s", strerror(errno));
	}
out:
	free(echo);
	free(got);
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
		r = -errno;
		ck_err_set("cannot set its termios: %s", strerror(errno));
		return r;
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
	int r = ck__put_in(m, s, t, q), r2;
	char first[512];

	/* the output goes back whatever became of the input (after its echo) */
	snprintf(first, sizeof(first), "%s", r < 0 ? ck_err_msg() : "");
	r2 = ck__put_out(s, t, q);
	if (r < 0)
		ck_err_set("%s", first);
	return r < 0 ? r : r2;
}
