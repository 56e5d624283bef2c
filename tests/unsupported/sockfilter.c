/* sockfilter: a UDP socket with a classic BPF filter attached
 * (SO_ATTACH_FILTER, accept all), used all along: ckrun cannot make the
 * filter again, so the round must be refused naming it, and the job must
 * go on (its datagrams all arrive). */
#include <linux/filter.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

int main(void)
{
	struct sock_filter code[] = {{BPF_RET | BPF_K, 0, 0, 0xffffffff}};
	struct sock_fprog prog = {1, code};
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	int r = socket(AF_INET, SOCK_DGRAM, 0), s = socket(AF_INET, SOCK_DGRAM, 0), got = 0;
	char b;

	if (r < 0 || s < 0 || bind(r, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(r, (struct sockaddr *)&a, &al) < 0 ||
	    setsockopt(r, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) < 0)
		return 1;
	for (int i = 0; i < 25; i++) {
		if (sendto(s, "x", 1, 0, (struct sockaddr *)&a, al) != 1)
			return 1;
		got += recv(r, &b, 1, 0) == 1;
		usleep(100000);
	}
	printf("sockfilter: %d of 25 datagrams\n", got);
	return 0;
}
