/* extpeer PORT: a job talking to a server outside it (an echo server on
 * 127.0.0.1:PORT). Every 100 ms it sends a line and reads the echo; the
 * first failure is printed with its errno name and ends the program (3).
 * After a restore, that connection must be reset by the peer. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	char line[32], back[32];
	int fd;

	if (argc < 2)
		return 2;
	a.sin_port = htons((unsigned short)atoi(argv[1]));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		printf("connect: %s\n", strerror(errno));
		return 2;
	}
	setvbuf(stdout, NULL, _IONBF, 0);
	for (int i = 0; i < 600; i++) {
		ssize_t n;
		snprintf(line, sizeof(line), "ping %04d\n", i);
		if (send(fd, line, 10, MSG_NOSIGNAL) != 10 || (n = recv(fd, back, 10, MSG_WAITALL)) != 10) {
			int e = errno;
			printf("step %d: %s\n", i, e == ECONNRESET ? "ECONNRESET" : e == EPIPE ? "EPIPE" : strerror(e));
			return 3;
		}
		if (i % 10 == 0)
			printf("step %d: echo ok\n", i);
		usleep(100000);
	}
	return 0;
}
