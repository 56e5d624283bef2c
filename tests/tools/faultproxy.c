/* faultproxy: a TCP proxy on 127.0.0.1 that breaks connections on demand,
 * to test how the S3 client survives a misbehaving gateway.
 *
 *   faultproxy -l PORT -t HOST:PORT -c CONTROL [-p PORTFILE]
 *
 * -l 0 picks a free port; it is printed and written to PORTFILE. CONTROL is a
 * file read at every new request (a new connection, or the client speaking
 * again on a kept-alive one after the gateway answered: a client's pooled
 * connections are no way around a fault); its one line chooses what
 * happens to the next requests (COUNT of them, 0 = all of them, counted
 * again from the moment the line changes):
 *   pass                       forward untouched (also: no file)
 *   reset COUNT BYTES          reset (RST) after BYTES bytes from the client
 *   slowdown COUNT             read the request, answer 503 SlowDown, close
 *   stall COUNT [BYTES]        forward the request, pass BYTES of the answer,
 *                              then hold the connection silent until the
 *                              client gives up
 * Each applied fault is logged on stderr. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

enum mode { M_PASS, M_RESET, M_SLOWDOWN, M_STALL };

static const char *control;
static struct sockaddr_in target;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char last_line[256];
static long applied;

struct conn {
	int cfd;
	enum mode mode;
	long bytes;
	long id;
};

/* What the next connection gets, from the control file. */
static void choose(struct conn *c)
{
	char line[256] = "", word[32] = "";
	long count = 0, bytes = 0;
	FILE *f = control ? fopen(control, "r") : NULL;

	if (f) {
		if (!fgets(line, sizeof(line), f))
			line[0] = 0;
		fclose(f);
	}
	pthread_mutex_lock(&lock);
	if (strcmp(line, last_line)) {
		snprintf(last_line, sizeof(last_line), "%s", line);
		applied = 0;
	}
	c->mode = M_PASS;
	if (sscanf(line, "%31s %ld %ld", word, &count, &bytes) >= 1 && (count == 0 || applied < count)) {
		if (!strcmp(word, "reset"))
			c->mode = M_RESET;
		else if (!strcmp(word, "slowdown"))
			c->mode = M_SLOWDOWN;
		else if (!strcmp(word, "stall"))
			c->mode = M_STALL;
		if (c->mode != M_PASS)
			applied++;
	}
	c->bytes = bytes;
	pthread_mutex_unlock(&lock);
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static void hard_reset(int fd)
{
	struct linger lg = { 1, 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
}

/* Reads one request (headers and Content-Length body; the first have bytes
 * of it already in buf), answers SlowDown. */
static void slowdown(struct conn *c, char *buf, size_t size, size_t have)
{
	static const char body[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown</Code>"
				   "<Message>Please reduce your request rate.</Message></Error>";
	char resp[512];
	long clen = 0, got;
	char *end = NULL, *cl;
	ssize_t n;

	buf[have] = 0;
	end = strstr(buf, "\r\n\r\n");
	while (!end && have < size - 1) {
		n = recv(c->cfd, buf + have, size - 1 - have, 0);
		if (n <= 0)
			return;
		have += (size_t)n;
		buf[have] = 0;
		end = strstr(buf, "\r\n\r\n");
	}
	if (!end)
		return;
	for (cl = buf; cl < end; cl++)
		if (!strncasecmp(cl, "\ncontent-length:", 16)) {
			clen = strtol(cl + 16, NULL, 10);
			break;
		}
	got = (long)(have - (size_t)(end + 4 - buf));
	while (got < clen) {
		n = recv(c->cfd, buf, size, 0);
		if (n <= 0)
			return;
		got += n;
	}
	snprintf(resp, sizeof(resp),
		 "HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nContent-Length: %zu\r\n"
		 "Connection: close\r\n\r\n",
		 sizeof(body) - 1);
	if (!write_all(c->cfd, resp, strlen(resp)))
		write_all(c->cfd, body, sizeof(body) - 1);
	shutdown(c->cfd, SHUT_WR);
	/* let the client read the answer before the socket goes */
	while (recv(c->cfd, buf, size, 0) > 0)
		;
}

static void relay(struct conn *c)
{
	struct pollfd p[2];
	char buf[65536];
	long up = 0, down = 0;
	int sfd = socket(AF_INET, SOCK_STREAM, 0), one = 1, stalled = 0, answered = 0;

	if (sfd < 0 || connect(sfd, (struct sockaddr *)&target, sizeof(target))) {
		fprintf(stderr, "faultproxy: cannot reach target: %s\n", strerror(errno));
		if (sfd >= 0)
			close(sfd);
		return;
	}
	setsockopt(sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	for (;;) {
		ssize_t n;

		p[0].fd = c->cfd;
		p[0].events = POLLIN;
		p[1].fd = stalled ? -1 : sfd;
		p[1].events = POLLIN;
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[0].revents) {
			n = recv(c->cfd, buf, sizeof(buf) - 1, 0);
			if (n <= 0)
				break;
			if (answered && c->mode == M_PASS) {
				/* a new request on a kept-alive connection */
				choose(c);
				up = down = 0;
				if (c->mode == M_SLOWDOWN) {
					fprintf(stderr, "faultproxy: conn %ld: answering 503 SlowDown\n", c->id);
					slowdown(c, buf, sizeof(buf), (size_t)n);
					break;
				}
			}
			answered = 0;
			if (c->mode == M_RESET && up + n >= c->bytes) {
				long keep = c->bytes - up;

				if (keep > 0)
					write_all(sfd, buf, (size_t)keep);
				fprintf(stderr, "faultproxy: conn %ld: reset after %ld bytes from the client\n", c->id,
					c->bytes);
				hard_reset(c->cfd);
				c->cfd = -1;
				hard_reset(sfd);
				return;
			}
			up += n;
			if (!stalled && write_all(sfd, buf, (size_t)n))
				break;
		}
		if (p[1].fd >= 0 && p[1].revents) {
			n = recv(sfd, buf, sizeof(buf), 0);
			if (n <= 0)
				break;
			if (c->mode == M_STALL && down + n >= c->bytes) {
				long keep = c->bytes - down;

				if (keep > 0)
					write_all(c->cfd, buf, (size_t)keep);
				fprintf(stderr, "faultproxy: conn %ld: stalled after %ld bytes of the answer\n", c->id,
					c->bytes);
				stalled = 1; /* from now on only notice the client leaving */
				close(sfd);
				sfd = -1;
				continue;
			}
			down += n;
			answered = 1;
			if (write_all(c->cfd, buf, (size_t)n))
				break;
		}
	}
	if (sfd >= 0)
		close(sfd);
}

static void *serve(void *arg)
{
	struct conn *c = arg;

	if (c->mode == M_SLOWDOWN) {
		char buf[65536];
		fprintf(stderr, "faultproxy: conn %ld: answering 503 SlowDown\n", c->id);
		slowdown(c, buf, sizeof(buf), 0);
	} else {
		relay(c);
	}
	if (c->cfd >= 0)
		close(c->cfd);
	free(c);
	return NULL;
}

static void usage(void)
{
	fprintf(stderr, "usage: faultproxy -l PORT -t HOST:PORT -c CONTROL [-p PORTFILE]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *tgt = NULL, *portfile = NULL;
	struct sockaddr_in a = { 0 };
	socklen_t alen = sizeof(a);
	int lfd, opt, one = 1, port = -1;
	long id = 0;
	char host[64];
	int tport;

	while ((opt = getopt(argc, argv, "l:t:c:p:")) != -1) {
		switch (opt) {
		case 'l': port = atoi(optarg); break;
		case 't': tgt = optarg; break;
		case 'c': control = optarg; break;
		case 'p': portfile = optarg; break;
		default: usage();
		}
	}
	if (port < 0 || !tgt || sscanf(tgt, "%63[^:]:%d", host, &tport) != 2)
		usage();
	target.sin_family = AF_INET;
	target.sin_port = htons((unsigned short)tport);
	if (inet_pton(AF_INET, host, &target.sin_addr) != 1) {
		fprintf(stderr, "faultproxy: target must be an IPv4 address: %s\n", host);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	a.sin_family = AF_INET;
	a.sin_port = htons((unsigned short)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK); /* loopback only */
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 128) ||
	    getsockname(lfd, (struct sockaddr *)&a, &alen)) {
		perror("faultproxy: listen");
		return 1;
	}
	printf("%d\n", ntohs(a.sin_port));
	fflush(stdout);
	if (portfile) {
		FILE *f = fopen(portfile, "w");

		if (!f || fprintf(f, "%d\n", ntohs(a.sin_port)) < 0 || fclose(f)) {
			perror(portfile);
			return 1;
		}
	}
	for (;;) {
		int cfd = accept(lfd, NULL, NULL);
		struct conn *c;
		pthread_t th;

		if (cfd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			perror("faultproxy: accept");
			return 1;
		}
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(cfd);
			continue;
		}
		setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c->cfd = cfd;
		c->id = ++id;
		choose(c);
		if (pthread_create(&th, NULL, serve, c)) {
			close(cfd);
			free(c);
			continue;
		}
		pthread_detach(th);
	}
}
