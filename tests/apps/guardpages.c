/* guardpages: guard pages and mprotect'ed regions, probed with SIGSEGV.
 *
 * State exercised: a region whose pages have different protections
 * (PROT_NONE guards at both ends and in the middle, read-only pages with
 * content, writable pages, an executable page holding a tiny generated
 * function), a SIGSEGV handler running on an alternate signal stack, and
 * sigsetjmp/siglongjmp to recover from deliberate faults. At every round all
 * pages are probed for read and write: exactly the expected ones must fault.
 * The fault count is therefore deterministic.
 * Usage: guardpages [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096UL
#define NPG 12

/* Protection of each page: N none, R read, W read+write, X read+exec. */
static const char layout[NPG + 1] = "NRRWWNWXRRWN";

static sigjmp_buf jb;
static volatile sig_atomic_t faults;
static volatile uintptr_t fault_addr;
static unsigned char *region;
static char altstack[64 * 1024];

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	char here;

	(void)sig;
	(void)uc;
	faults++;
	fault_addr = (uintptr_t)si->si_addr;
	/* Must run on the alternate stack. */
	if (&here < altstack || &here >= altstack + sizeof(altstack))
		fault_addr = 1;
	siglongjmp(jb, 1);
}

/* 1 if accessing addr faults. */
static int probe(volatile unsigned char *addr, int write)
{
	if (sigsetjmp(jb, 1))
		return fault_addr == (uintptr_t)addr ? 1 : 2;
	if (write)
		*addr = *addr;
	else
		(void)*addr;
	return 0;
}

static int prot_of(char c)
{
	switch (c) {
	case 'R': return PROT_READ;
	case 'W': return PROT_READ | PROT_WRITE;
	case 'X': return PROT_READ | PROT_EXEC;
	default: return PROT_NONE;
	}
}

int main(int argc, char **argv)
{
	long rounds = (long)(10 * app_scale(argc, argv));
	struct sigaction sa;
	stack_t ss = { .ss_sp = altstack, .ss_size = sizeof(altstack) }, cur;
	uint64_t x = 9;
	long expected_faults = 0;
	int rc = 0;

	if (rounds < 1)
		rounds = 1;
	region = mmap(NULL, NPG * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (region == MAP_FAILED)
		return 1;
	for (int p = 0; p < NPG; p++)
		memset(region + p * PAGE, 0x40 + p, PAGE);
	/* x86-64: mov eax, 0x2a5; ret */
	static const unsigned char code[] = { 0xb8, 0xa5, 0x02, 0x00, 0x00, 0xc3 };
	memcpy(region + 7 * PAGE, code, sizeof(code));
	for (int p = 0; p < NPG; p++)
		mprotect(region + p * PAGE, PAGE, prot_of(layout[p]));
	sigaltstack(&ss, NULL);
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
	printf("guardpages: layout %s, %ld rounds\n", layout, rounds);

	for (long r = 0; r < rounds; r++) {
		char seen[NPG + 1];
		int bad = 0;

		for (long i = 0; i < 250000000; i++)
			x = x * 2862933555777941757ULL + 3037000493ULL;
		for (int p = 0; p < NPG; p++) {
			volatile unsigned char *a = region + p * PAGE + (size_t)(r * 67 % PAGE);
			int rf = probe(a, 0), wf = probe(a, 1);
			seen[p] = rf ? 'N' : wf ? 'R' : 'W';
			if (layout[p] == 'X' && seen[p] == 'R')
				seen[p] = 'X';
			if (rf == 2 || wf == 2 || (rf == 0 && a[0] != 0x40 + p && layout[p] != 'X'))
				bad++;
			expected_faults += (layout[p] == 'N') * 2 + (layout[p] == 'R' || layout[p] == 'X');
		}
		seen[NPG] = 0;
		int ret = ((int (*)(void))(void *)(region + 7 * PAGE))();
		printf("round %ld: probed %s, generated code returns %d\n", r + 1, seen, ret);
		if (strcmp(seen, layout) != 0 || ret != 0x2a5 || bad)
			rc = 1;
	}
	sigaltstack(NULL, &cur);
	printf("faults taken %ld (expected %ld), alternate stack %s\n", (long)faults, expected_faults,
	       cur.ss_sp == altstack && cur.ss_size == sizeof(altstack) ? "kept" : "LOST");
	if (faults != expected_faults || cur.ss_sp != altstack)
		rc = 1;
	printf("compute %016llx\n", (unsigned long long)x);
	printf("guardpages: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
