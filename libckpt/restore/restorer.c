/* ckpt-restore: the static, libc-free program that becomes a restored
 * process. ckrun starts it in the job's new namespaces with the pid of the
 * saved main thread; it is linked far from where programs, heaps, mmaps and
 * stacks live (CK_RST_BASE), so it can rebuild the saved address space
 * around itself:
 *
 *   0. take a channel of its own (a socketpair, one end sent to ckrun over
 *      the inherited one); on ckrun's word create the saved children with
 *      their pids (each one a restorer again), join the saved session and
 *      process group, or end as a saved zombie did;
 *   1. get the layout (regions, mm fields) and the
 *      descriptors ckrun prepared (SCM_RIGHTS), place them at their numbers;
 *   2. move the kernel's vDSO/vvar to the saved addresses, unmap everything
 *      else that is not the restorer;
 *   3. map every saved region (files by path where they still match),
 *      writable; ckrun fills them with verified bytes (process_vm_writev);
 *   4. set final protections and mm fields, block signals, and jump to
 *      libckpt's restart entry inside the restored image, which unmaps the
 *      restorer and re-creates the threads.
 * Any failure is reported to ckrun as one line and the process exits: the
 * job never runs half-restored. */
#include <fcntl.h>
#include <asm/ioctls.h>
#include <linux/prctl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>

#include "ckrun/proto.h"
#include "ckrun/regions.h"
#include "libckpt/ck_sys.h"

char ck_rst_stack[128 << 10] __attribute__((aligned(64)));
__asm__(".globl ck_rst_stack_top\n.set ck_rst_stack_top, ck_rst_stack + (128 << 10)\n");

extern char __executable_start[];

static struct ck_msg ck__msg;
/* Our channel: CK_CTL_FD, unless the job's saved descriptors hold that
 * number (ck__place_fds moves it then). */
static int ck__ctl = CK_CTL_FD;
static char ck__mapsbuf[65536];

/* The compiler may emit calls to these for struct copies. */
void *memset(void *d, int c, size_t n);
void *memcpy(void *d, const void *s, size_t n);
void *memset(void *d, int c, size_t n)
{
	ck_memset(d, c, n);
	return d;
}
void *memcpy(void *d, const void *s, size_t n)
{
	ck_memcpy(d, s, n);
	return d;
}

static int ck__send(uint32_t type, uint64_t a0, const char *text)
{
	ck_memset(&ck__msg, 0, __builtin_offsetof(struct ck_msg, text));
	ck__msg.type = type;
	ck__msg.arg[0] = a0;
	if (text) {
		ck__msg.len = (uint32_t)ck_strlen(text);
		if (ck__msg.len > 1000)
			ck__msg.len = 1000;
		ck_memcpy(ck__msg.text, text, ck__msg.len);
	}
	return ck_send_with_creds(ck__ctl, &ck__msg, __builtin_offsetof(struct ck_msg, text) + ck__msg.len) < 0
		       ? -1
		       : 0;
}

static __attribute__((noreturn)) void ck__die(const char *what, long err)
{
	char line[256];
	size_t n = ck_strlen(what);
	long e = -err;
	char num[24];
	int k = 0;

	if (n > 200)
		n = 200;
	ck_memcpy(line, what, n);
	if (err < 0) {
		ck_memcpy(line + n, " (errno ", 8);
		n += 8;
		do
			num[k++] = (char)('0' + e % 10);
		while ((e /= 10) && k < 20);
		while (k)
			line[n++] = num[--k];
		line[n++] = ')';
	}
	line[n] = 0;
	ck__send(CK_MSG_RST_ERROR, (uint64_t)err, line);
	ck_exit_group(1);
}

/* Receives one message; with fds != NULL also up to max descriptors. */
static int ck__recv(int *fds, int max, int *nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 250)];
		struct cmsghdr align;
	} u;
	struct iovec iov = {&ck__msg, sizeof(ck__msg)};
	struct msghdr mh;
	long r;

	ck_memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = u.buf;
	mh.msg_controllen = sizeof(u.buf);
	do
		r = ck_sys3(SYS_recvmsg, ck__ctl, &mh, MSG_CMSG_CLOEXEC);
	while (r == -4 /* EINTR */);
	if (r <= 0)
		ck_exit_group(1); /* ckrun is gone */
	if (nfds)
		*nfds = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		int n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		if (!fds || n > max)
			ck__die("restorer: unexpected descriptors", -22);
		ck_memcpy(fds, CMSG_DATA(c), sizeof(int) * (size_t)n);
		*nfds = n;
	}
	return 0;
}

static uint64_t ck__hex(const char **p)
{
	uint64_t v = 0;

	for (;; (*p)++) {
		int c = **p, d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else
			break;
		v = (v << 4) | (uint64_t)d;
	}
	return v;
}

struct ck__map {
	uint64_t start, end;
	char name[32];
};

/* Our own mappings, from /proc/self/maps. */
static int ck__own_maps(struct ck__map *out, int max)
{
	long fd = ck_openat(AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC, 0), n, got = 0;
	int cnt = 0;
	const char *p;

	if (fd < 0)
		ck__die("restorer: cannot read /proc/self/maps", fd);
	while ((n = ck_read((int)fd, ck__mapsbuf + got, sizeof(ck__mapsbuf) - 1 - got)) > 0)
		got += n;
	ck_close((int)fd);
	ck__mapsbuf[got] = 0;
	for (p = ck__mapsbuf; *p && cnt < max;) {
		struct ck__map *m = &out[cnt++];
		const char *eol;
		m->start = ck__hex(&p);
		p++;
		m->end = ck__hex(&p);
		for (eol = p; *eol && *eol != '\n'; eol++)
			;
		m->name[0] = 0;
		for (const char *q = p; q < eol; q++) {
			if (*q == '[') {
				int k = 0;
				while (q < eol && k < 31)
					m->name[k++] = *q++;
				m->name[k] = 0;
				break;
			}
		}
		p = *eol ? eol + 1 : eol;
	}
	return cnt;
}

static int ck__streq(const char *a, const char *b)
{
	return ck_strlen(a) == ck_strlen(b) && ck_strncmp(a, b, ck_strlen(a)) == 0;
}

#define CK_RST_TEMP (CK_RST_BASE + 0x30000000ull)

/* Special mappings: move the kernel's vvar, vvar_vclock and vdso to where
 * the saved process had them (the saved code holds pointers into them). */
static void ck__place_specials(const struct ck_rst_layout *l)
{
	struct ck__map maps[64];
	int n = ck__own_maps(maps, 64);
	const char *names[3] = {"[vvar]", "[vvar_vclock]", "[vdso]"};
	uint64_t want[3][2] = {{l->vvar_start, l->vvar_end},
			       {l->vclock_start, l->vclock_end},
			       {l->vdso_start, l->vdso_end}};
	uint64_t cur[3][2] = {{0, 0}, {0, 0}, {0, 0}};
	uint64_t tmp = CK_RST_TEMP, lo_tmp = CK_RST_TEMP, cur_off[3] = {0, 0, 0};

	for (int i = 0; i < n; i++)
		for (int k = 0; k < 3; k++)
			if (ck__streq(maps[i].name, names[k])) {
				cur[k][0] = maps[i].start;
				cur[k][1] = maps[i].end;
			}
	for (int k = 0; k < 3; k++) {
		if (!cur[k][0])
			continue;
		if (l->vdso_mode == 1)
			continue;
		if (want[k][0] && want[k][1] - want[k][0] != cur[k][1] - cur[k][0])
			ck__die("restorer: the vDSO layout of this kernel differs from the checkpointing kernel's", -95);
		if (!want[k][0] && l->vdso_start)
			ck__die("restorer: this kernel has a special mapping the checkpointing kernel had not", -95);
	}
	/* Keep the kernel's relative layout of the specials through the
	 * temporary move: each goes to CK_RST_TEMP + its offset from the
	 * lowest one. */
	{
		uint64_t lo = ~0ull;
		for (int k = 0; k < 3; k++)
			if (cur[k][0] && cur[k][0] < lo)
				lo = cur[k][0];
		for (int k = 0; k < 3; k++)
			if (cur[k][0])
				cur_off[k] = cur[k][0] - lo;
	}
	/* Out of the way first, so no move lands on another special. */
	(void)tmp;
	for (int k = 0; k < 3; k++) {
		uint64_t len = cur[k][1] - cur[k][0];
		long r;
		if (!cur[k][0])
			continue;
		r = ck_mremap(cur[k][0], len, len, MREMAP_MAYMOVE | MREMAP_FIXED, CK_RST_TEMP + cur_off[k]);
		if (r < 0)
			ck__die("restorer: cannot move the vDSO", r);
		cur[k][0] = CK_RST_TEMP + cur_off[k];
		cur[k][1] = cur[k][0] + len;
	}
	/* Drop every mapping that is not ours: the kernel's stack and
	 * anything else the exec left. */
	n = ck__own_maps(maps, 64);
	for (int i = 0; i < n; i++) {
		if (maps[i].start >= CK_RST_BASE && maps[i].end <= CK_RST_BASE + 0x100000000ull)
			continue;
		if (ck__streq(maps[i].name, "[vsyscall]"))
			continue;
		ck_munmap(maps[i].start, maps[i].end - maps[i].start);
	}
	for (int k = 0; k < 3; k++) {
		long r;
		uint64_t to = want[k][0];
		if (!cur[k][0])
			continue;
		if (l->vdso_mode == 1) /* another vDSO: to a free gap, same relative layout */
			to = l->new_special_base + (cur[k][0] - lo_tmp);
		if (!to)
			continue;
		r = ck_mremap(cur[k][0], cur[k][1] - cur[k][0], cur[k][1] - cur[k][0], MREMAP_MAYMOVE | MREMAP_FIXED, to);
		if (r < 0)
			ck__die("restorer: cannot place the vDSO", r);
	}
}

/* Another kernel's vDSO: the old one's bytes are restored as memory; each
 * of its functions now starts with movabs $new, %rax; jmp *%rax. */
static void ck__write_trampolines(const struct ck_rst_layout *l)
{
	for (uint32_t i = 0; i < l->ntramp && i < CK_RST_MAX_TRAMP; i++) {
		unsigned char *p = (unsigned char *)(uintptr_t)l->tramp[i].old_addr;
		uint64_t to = l->tramp[i].new_addr;
		p[0] = 0x48;
		p[1] = 0xb8;
		ck_memcpy(p + 2, &to, 8);
		p[10] = 0xff;
		p[11] = 0xe0;
	}
}

static void ck__map_region(const struct ck_rst_region *rg, const char *strings)
{
	uint64_t len = rg->end - rg->start;
	int shared = rg->flags & CK_REG_SHARED;
	long r = -1;

	if (rg->flags & CK_REG_SYSV) {
		/* System V memory: attach the segment (ckrun made it with its id)
		 * where it was; later pieces of the same attachment are in it. */
		if (rg->file_off)
			return;
		r = ck_sys3(SYS_shmat, rg->map_fd, (long)rg->start, (rg->prot & PROT_WRITE) ? 0 : 010000 /* SHM_RDONLY */);
		if (r != (long)rg->start)
			ck__die("restorer: cannot attach a System V shared memory segment", r < 0 ? r : -14);
		return;
	}
	if (rg->map_fd >= 0) {
		/* A deleted file or memfd the process also holds open: map that
		 * very file again, so the mapping and the descriptor alias. With
		 * its own protection: a memfd sealed against writes (F_SEAL_WRITE)
		 * refuses a writable shared mapping, and the job's had none. */
		r = ck_mmap(rg->start, len, (int)rg->prot, MAP_SHARED | MAP_FIXED_NOREPLACE, rg->map_fd, rg->file_off);
		if (r < 0)
			ck__die("restorer: cannot map a shared file region from its descriptor", r);
		return;
	}
	if ((rg->flags & CK_REG_FILE) && !(rg->flags & CK_REG_DELETED) && rg->path_off) {
		const char *path = strings + rg->path_off;
		int wr = shared && (rg->prot & PROT_WRITE);
		long fd = ck_openat(AT_FDCWD, path, (wr ? O_RDWR : O_RDONLY) | O_CLOEXEC, 0);
		struct {
			uint64_t size_dummy[6];
			int64_t size;
			uint64_t rest[11];
		} st;
		/* The file's own pages (CK_REG_FILEPAGES): ckrun checked it is the
		 * file saved; past its end they fault as they did. */
		if (fd >= 0 && ck_sys2(SYS_fstat, fd, &st) == 0 &&
		    ((rg->flags & CK_REG_FILEPAGES) || (uint64_t)st.size >= rg->file_off + (shared ? 1 : len))) {
			r = ck_mmap(rg->start, len, shared ? (int)rg->prot : PROT_READ | PROT_WRITE,
				    (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_FIXED_NOREPLACE, (int)fd, rg->file_off);
		}
		if (fd >= 0)
			ck_close((int)fd);
		if (r < 0 && shared)
			ck__die("restorer: cannot map a shared file region again", r < 0 ? r : -2);
		if (r < 0 && (rg->flags & CK_REG_FILEPAGES)) /* not saved: no other source */
			ck__die("restorer: cannot map a file's pages again", fd < 0 ? fd : r);
		if (r >= 0)
			return;
	}
	{
		int flags = MAP_FIXED_NOREPLACE | MAP_ANONYMOUS | (shared ? MAP_SHARED : MAP_PRIVATE);
		if (rg->flags & CK_REG_GROWSDOWN)
			flags |= MAP_GROWSDOWN;
		if (rg->flags & CK_REG_NORESERVE)
			flags |= MAP_NORESERVE;
		r = ck_mmap(rg->start, len, rg->fill ? PROT_READ | PROT_WRITE : (int)rg->prot, flags, -1, 0);
	}
	if (r < 0)
		ck__die("restorer: cannot map a saved region (address taken?)", r);
	/* The job's advice (failures ignored: it changes no byte), and huge
	 * pages for the fill where the kernel has them (rg->thp, a hint). */
	if (rg->thp || (rg->flags & CK_REG_ADV_HUGE))
		(void)ck_sys3(SYS_madvise, rg->start, len, MADV_HUGEPAGE);
	if (rg->flags & CK_REG_ADV_NOHUGE)
		(void)ck_sys3(SYS_madvise, rg->start, len, MADV_NOHUGEPAGE);
	if (rg->flags & CK_REG_ADV_DONTDUMP)
		(void)ck_sys3(SYS_madvise, rg->start, len, MADV_DONTDUMP);
	if (rg->flags & CK_REG_ADV_DONTFORK)
		(void)ck_sys3(SYS_madvise, rg->start, len, MADV_DONTFORK);
	if (rg->flags & CK_REG_ADV_RANDOM)
		(void)ck_sys3(SYS_madvise, rg->start, len, MADV_RANDOM);
	if (rg->flags & CK_REG_ADV_SEQUENTIAL)
		(void)ck_sys3(SYS_madvise, rg->start, len, MADV_SEQUENTIAL);
}

/* Descriptors: ckrun sends each prepared one with its target number. They
 * arrive at the lowest free numbers; once all are here each goes to its
 * target, and an arrival sitting on a target still to be filled is first
 * moved to a free number that is no target. So the numbers used are the
 * targets, the arrivals and a few more, and a job near its hard
 * RLIMIT_NOFILE restores within it. (Parking every descriptor first took
 * up to three numbers per descriptor: a job holding 900 under a hard limit
 * of 1024 committed checkpoints it could not restore. A fixed parking area
 * above 1100 made a descriptor above it impossible to restore.) */
#define CK_FD_SPARE_MIN 1100
#define CK_FD_MAP_RANGE (2 * CK_RST_MAX_FDS + CK_FD_SPARE_MIN + 64) /* where moved arrivals go */
static uint8_t ck__fd_target[CK_FD_MAP_RANGE / 8];

static int ck__fd_is_target(int32_t n)
{
	return n >= 0 && n < CK_FD_MAP_RANGE && (ck__fd_target[n / 8] & (1u << (n % 8)));
}

/* A free number below limit that is no target and not the channel, from
 * *from on (once more from 0 when none is left there). */
static int32_t ck__fd_spot(int32_t *from, int32_t limit)
{
	if (limit > CK_FD_MAP_RANGE)
		limit = CK_FD_MAP_RANGE;
	for (int pass = 0; pass < 2; pass++, *from = 0)
		for (; *from < limit; (*from)++)
			if (!ck__fd_is_target(*from) && *from != ck__ctl &&
			    ck_sys3(SYS_fcntl, *from, F_GETFD, 0) == -9 /* EBADF: free */)
				return (*from)++;
	ck__die("restorer: no free descriptor number to move an arrival to", -24);
}

/* Sorts v[0..n) ascending (shell sort: no libc here). */
static void ck__sort_i32(int32_t *v, uint32_t n)
{
	for (uint32_t gap = n / 2; gap; gap /= 2)
		for (uint32_t i = gap; i < n; i++)
			for (uint32_t j = i; j >= gap && v[j - gap] > v[j]; j -= gap) {
				int32_t t = v[j];
				v[j] = v[j - gap];
				v[j - gap] = t;
			}
}

static void ck__place_fds(uint32_t nfds)
{
	static int32_t target[CK_RST_MAX_FDS], held[CK_RST_MAX_FDS], kept[CK_RST_MAX_FDS + 1];
	static int fds[250];
	uint32_t got = 0;
	uint64_t lim[2], need;
	int32_t top = ck__ctl, from = 0, spare, soft;
	int moved = 0;

	if (nfds > CK_RST_MAX_FDS)
		ck__die("restorer: too many descriptors", -7);
	/* room for what arrives */
	if (ck_sys4(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, lim) == 0 && lim[0] < lim[1] && lim[0] < CK_FD_MAP_RANGE) {
		lim[0] = lim[1] < CK_FD_MAP_RANGE ? lim[1] : CK_FD_MAP_RANGE;
		ck_sys4(SYS_prlimit64, 0, RLIMIT_NOFILE, lim, 0);
	}
	ck_memset(ck__fd_target, 0, sizeof(ck__fd_target));
	while (got < nfds) {
		int n;
		ck__recv(fds, 250, &n);
		if (ck__msg.type != CK_MSG_RST_FDS || (uint32_t)n * 4 != ck__msg.len || got + (uint32_t)n > nfds)
			ck__die("restorer: bad descriptor message", -22);
		for (int i = 0; i < n; i++) {
			int32_t t;
			held[got + (uint32_t)i] = fds[i];
			ck_memcpy(&t, ck__msg.text + 4 * i, 4);
			target[got + (uint32_t)i] = t;
			t = t < 0 ? -t - 1 : t;
			if (t < 0)
				ck__die("restorer: a bad descriptor number", -22);
			if (t < CK_FD_MAP_RANGE)
				ck__fd_target[t / 8] |= (uint8_t)(1u << (t % 8));
			if (t > top)
				top = t;
			moved |= t == ck__ctl;
		}
		got += (uint32_t)n;
	}
	/* the channel's spare number (where a descriptor of the job's takes
	 * its own): well above, out of the way of the job's next opens and
	 * of the descriptors its process opens again itself (/proc files,
	 * pidfds, which ckrun does not send; libckpt moves the channel off
	 * one of those where they meet, fdstate.c), within the hard limit */
	spare = top + 1 > CK_FD_SPARE_MIN + (int32_t)nfds ? top + 1 : CK_FD_SPARE_MIN + (int32_t)nfds;
	if (moved && (ck_sys4(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, lim) < 0 || lim[1] <= (uint64_t)spare ||
		      ck_sys3(SYS_fcntl, spare, F_GETFD, 0) != -9))
		spare = ck__fd_spot(&from, (int32_t)(lim[0] < INT32_MAX ? lim[0] : INT32_MAX));
	if (moved && spare > top)
		top = spare;
	need = (uint64_t)top + 1;
	if (ck_sys4(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, lim) == 0 && lim[0] < need) {
		if (lim[1] < need)
			ck__die("restorer: a saved descriptor number is above the restorer's RLIMIT_NOFILE", -24);
		lim[0] = need;
		ck_sys4(SYS_prlimit64, 0, RLIMIT_NOFILE, lim, 0);
	}
	soft = ck_sys4(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, lim) == 0 && lim[0] < INT32_MAX ? (int32_t)lim[0] : INT32_MAX;
	/* A descriptor of the job's own at the channel's number (it dup2'd
	 * onto it): the channel goes to the spare number, out of its way. */
	if (moved) {
		long r = ck_sys3(SYS_dup3, ck__ctl, spare, O_CLOEXEC);
		if (r < 0)
			ck__die("restorer: cannot move the channel", r);
		ck_close(ck__ctl);
		ck__ctl = spare;
	}
	from = 0;
	for (uint32_t i = 0; i < nfds; i++) {
		int cloexec = target[i] < 0;
		int32_t t = cloexec ? -target[i] - 1 : target[i];
		uint32_t j;
		long r;
		if (t == ck__ctl)
			ck__die("restorer: a saved descriptor number collides with the restorer's", -16);
		kept[i] = t;
		if (held[i] == t) {
			if ((r = ck_sys3(SYS_fcntl, t, F_SETFD, cloexec ? FD_CLOEXEC : 0)) < 0)
				ck__die("restorer: cannot place a descriptor", r);
			continue;
		}
		/* an arrival still to be placed sits there: moved off first
		 * (placed ones sit on their own targets, which are not t) */
		for (j = i + 1; j < nfds && held[j] != t; j++)
			;
		if (j < nfds) {
			int32_t to = ck__fd_spot(&from, soft);
			if ((r = ck_sys3(SYS_dup3, held[j], to, O_CLOEXEC)) < 0)
				ck__die("restorer: cannot move a descriptor", r);
			ck_close(held[j]);
			held[j] = to;
		}
		if ((r = ck_sys3(SYS_dup3, held[i], t, cloexec ? O_CLOEXEC : 0)) < 0)
			ck__die("restorer: cannot place a descriptor", r);
		ck_close(held[i]);
	}
	/* Everything else the restorer holds goes: what lies between the
	 * placed ones and the channel. */
	kept[nfds] = ck__ctl;
	ck__sort_i32(kept, nfds + 1);
	{
		int32_t lo = 0;
		for (uint32_t i = 0; i <= nfds; i++) {
			if (kept[i] > lo)
				ck_sys3(SYS_close_range, lo, kept[i] - 1, 0);
			lo = kept[i] + 1;
		}
		ck_sys3(SYS_close_range, lo, ~0U, 0);
	}
}

/* A channel of our own; the inherited one is our parent's (or init's). */
static void ck__attach(void)
{
	static struct ck_msg hello;
	int sp[2];
	long r = ck_sys4(SYS_socketpair, AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp);

	if (r < 0)
		ck_exit_group(1);
	hello.type = CK_MSG_RST_HELLO;
	hello.arg[0] = (uint64_t)ck_getpid();
	r = ck_send_with_creds_fd(ck__ctl, &hello, __builtin_offsetof(struct ck_msg, text), sp[1]);
	ck_close(sp[1]);
	if (r < 0 || ck_sys3(SYS_dup3, sp[0], ck__ctl, 0) < 0)
		ck_exit_group(1);
	ck_close(sp[0]);
}

/* One answer to CK_MSG_RST_SOCK: the descriptor (closed here once sent)
 * or the error r (the caller has closed what it made); text: a
 * listener's name. */
static void ck__sock_answer(long r, int fd, const void *name, uint32_t len)
{
	static struct ck_msg m;

	ck_memset(&m, 0, sizeof(m));
	m.type = CK_MSG_RST_SOCK_FD;
	m.arg[0] = (uint64_t)(r < 0 ? r : 0);
	m.len = len;
	if (len)
		ck_memcpy(m.text, name, len);
	if (ck_send_with_creds_fd(ck__ctl, &m, __builtin_offsetof(struct ck_msg, text) + len, r < 0 ? -1 : fd) < 0)
		ck_exit_group(1); /* ckrun is gone */
	if (r >= 0 && fd >= 0)
		ck_close(fd);
}

/* A UNIX socket made by this process (CK_MSG_RST_SOCK): its pid is what
 * SO_PEERCRED of the connection's other end reads. given: the descriptor
 * that came with the message (-1: none). */
static void ck__sock_do(int given)
{
	int type = (int)ck__msg.arg[1] | SOCK_CLOEXEC, sp[2] = {-1, -1};
	struct sockaddr_un a;
	uint32_t alen = ck__msg.len;
	long r, fd;

	if (given >= 0 && ck__msg.arg[0] != CK_RST_SOCK_RELISTEN) {
		ck_close(given);
		given = -1;
	}
	switch (ck__msg.arg[0]) {
	case CK_RST_SOCK_RELISTEN:
		r = given < 0 ? -22 : ck_sys2(SYS_listen, given, (long)ck__msg.arg[2]);
		if (given >= 0)
			ck_close(given);
		ck__sock_answer(r < 0 ? r : 0, -1, 0, 0);
		return;
	case CK_RST_SOCK_PAIR:
		r = ck_sys4(SYS_socketpair, AF_UNIX, type, 0, sp);
		ck__sock_answer(r, sp[0], 0, 0);
		if (r >= 0)
			ck__sock_answer(0, sp[1], 0, 0);
		return;
	case CK_RST_SOCK_LISTEN:
		fd = ck_sys3(SYS_socket, AF_UNIX, type, 0);
		ck_memset(&a, 0, sizeof(a));
		a.sun_family = AF_UNIX;
		alen = sizeof(a);
		/* an address of only the family: the kernel picks an abstract name */
		r = fd < 0 ? fd : ck_sys3(SYS_bind, fd, &a, sizeof(sa_family_t));
		if (r >= 0)
			r = ck_sys2(SYS_listen, fd, 1);
		if (r >= 0)
			r = ck_sys3(SYS_getsockname, fd, &a, &alen);
		if (r < 0 && fd >= 0)
			ck_close((int)fd);
		ck__sock_answer(r < 0 ? r : 0, (int)fd, &a, r < 0 ? 0 : alen);
		return;
	case CK_RST_SOCK_CONNECT:
		if (alen > sizeof(a) || alen <= sizeof(sa_family_t)) {
			ck__sock_answer(-22, -1, 0, 0);
			return;
		}
		ck_memcpy(&a, ck__msg.text, alen);
		/* not waiting: a listener whose queue strays filled says EAGAIN */
		fd = ck_sys3(SYS_socket, AF_UNIX, type | SOCK_NONBLOCK, 0);
		r = fd < 0 ? fd : ck_sys3(SYS_connect, fd, &a, alen);
		if (r >= 0)
			r = ck_sys3(SYS_fcntl, fd, F_SETFL, 0);
		if (r < 0 && fd >= 0)
			ck_close((int)fd);
		ck__sock_answer(r < 0 ? r : 0, (int)fd, 0, 0);
		return;
	default:
		ck__sock_answer(-22, -1, 0, 0);
	}
}

/* ck__sock_do as the effective uid and gid ckrun names in arg3 (the
 * kernel notes them with the pid), where this restorer may take them (a
 * root one, whose saved uid brings it back); else as itself. A change of
 * ids resets the dumpable flag, which ckrun's writing of this process's
 * memory needs where it lacks CAP_SYS_PTRACE: set again after. */
static void ck__sock_make(int given)
{
	uint64_t ids = ck__msg.arg[3];
	long uid = (long)(uint32_t)ids, gid = (long)(uint32_t)(ids >> 32);
	long ouid = ck_sys0(SYS_geteuid), ogid = ck_sys0(SYS_getegid);
	long dumpable = ck_sys2(SYS_prctl, PR_GET_DUMPABLE, 0);
	int as = ids != UINT64_MAX && (uid != ouid || gid != ogid), changed = 0;

	if (as && ck_sys3(SYS_setresgid, -1, gid, -1) == 0) {
		changed = 1;
		if (ck_sys3(SYS_setresuid, -1, uid, -1) < 0)
			ck_sys3(SYS_setresgid, -1, ogid, -1);
	}
	ck__sock_do(given);
	if (changed) {
		if (ck_sys3(SYS_setresuid, -1, ouid, -1) < 0 || ck_sys3(SYS_setresgid, -1, ogid, -1) < 0)
			ck__die("restorer: cannot take its own ids back after making a socket", -1);
		if (dumpable >= 0)
			ck_sys2(SYS_prctl, PR_SET_DUMPABLE, dumpable);
	}
}

/* A process's children, as the tree's messages bring them. */
static struct ck_rst_child ck__kids[CK_RST_MAX_CHILDREN];
static uint64_t ck__nkids;

/* The children marked early (or the others) with their saved pids:
 * returns 1 in a new child, 0 here once all are made. */
static int ck__make_kids(const struct ck_rst_child *kids, uint64_t n, int early)
{
	for (uint64_t i = 0; i < n; i++) {
		struct clone_args ca;
		pid_t want = kids[i].pid;
		long r;

		if (!!(kids[i].flags & CK_RST_CHILD_EARLY) != early)
			continue;
		ck_memset(&ca, 0, sizeof(ca));
		ca.exit_signal = SIGCHLD;
		ca.set_tid = (uint64_t)(uintptr_t)&want;
		ca.set_tid_size = 1;
		r = ck_sys2(SYS_clone3, (long)&ca, sizeof(ca));
		if (r == 0)
			return 1;
		if (r < 0)
			ck__die("restorer: cannot create a child with its saved pid (taken?)", r);
	}
	return 0;
}

/* The saved tree: children with their pids, then session and group, then
 * zombies end. Returns in a new child (1) or when the layout comes (0). */
static int ck__tree_step(void)
{
	for (;;) {
		int tty = -1, ntty = 0;

		ck__recv(&tty, 1, &ntty);
		if (!ntty)
			tty = -1;
		/* only a session's terminal (or a listener: CK_MSG_RST_SOCK) comes
		 * with these messages */
		if (tty >= 0 && ck__msg.type != CK_MSG_RST_TREE && ck__msg.type != CK_MSG_RST_FGPGRP &&
		    ck__msg.type != CK_MSG_RST_SOCK)
			ck__die("restorer: unexpected descriptors", -22);
		switch (ck__msg.type) {
		case CK_MSG_RST_LAYOUT:
			return 0;
		case CK_MSG_RST_KIDS:
		case CK_MSG_RST_TREE: {
			uint64_t k = ck__msg.arg[0], n = ck__nkids;
			long r;
			if (k > CK_RST_KIDS_PER_MSG || k > CK_RST_MAX_CHILDREN - n || ck__msg.len != k * sizeof(ck__kids[0]))
				ck__die("restorer: bad tree message", -22);
			ck_memcpy(ck__kids + n, ck__msg.text, k * sizeof(ck__kids[0]));
			ck__nkids = n += k;
			if (ck__msg.type == CK_MSG_RST_KIDS)
				break;
			ck__nkids = 0; /* (a child made below starts with none) */
			if (ck__msg.arg[2] != n)
				ck__die("restorer: bad tree message (children missing)", -22);
			/* the children that stay in this process's first session,
			 * then its own session and terminal (inherited by the rest) */
			if (ck__make_kids(ck__kids, n, 1)) {
				if (tty >= 0)
					ck_close(tty);
				return 1;
			}
			if ((ck__msg.arg[1] & CK_RST_SETSID) && (r = ck_sys0(SYS_setsid)) < 0)
				ck__die("restorer: cannot start the saved session (setsid)", r);
			if (ck__msg.arg[1] & CK_RST_CTTY) {
				if (tty < 0)
					ck__die("restorer: no terminal came for the session", -22);
				if ((r = ck_sys3(SYS_ioctl, tty, TIOCSCTTY, 0)) < 0)
					ck__die("restorer: cannot make the saved controlling terminal (TIOCSCTTY)", r);
			}
			if (tty >= 0)
				ck_close(tty);
			if (ck__make_kids(ck__kids, n, 0))
				return 1;
			ck__send(CK_MSG_RST_TREE_DONE, n, 0);
			break;
		}
		case CK_MSG_RST_FGPGRP: {
			int pg = (int)ck__msg.arg[0];
			long r = tty < 0 ? -22 : ck_sys3(SYS_ioctl, tty, TIOCSPGRP, &pg);
			if (r < 0)
				ck__die("restorer: cannot give the terminal its saved foreground group (TIOCSPGRP)", r);
			ck_close(tty);
			ck__send(CK_MSG_RST_FGPGRP_DONE, 0, 0);
			break;
		}
		case CK_MSG_RST_PGID: {
			long r = ck_sys2(SYS_setpgid, 0, (long)ck__msg.arg[0]);
			if (r < 0)
				ck__die("restorer: cannot join the saved process group", r);
			ck__send(CK_MSG_RST_PGID_DONE, 0, 0);
			break;
		}
		case CK_MSG_RST_SOCK:
			ck__sock_make(tty);
			break;
		case CK_MSG_RST_REAP: {
			long r;
			int st;
			while ((r = ck_sys4(SYS_wait4, (long)ck__msg.arg[0], &st, 0x40000000 /* __WALL */, 0)) == -4 /* EINTR */)
				;
			ck__send(CK_MSG_RST_REAP_DONE, (uint64_t)(r < 0 ? r : 0), 0);
			break;
		}
		case CK_MSG_RST_EXIT: {
			int st = (int)ck__msg.arg[0], sig = st & 0x7f;
			uint64_t none = 0, zero[2] = {0, 0};
			if (!sig)
				ck_exit_group((st >> 8) & 0xff);
			/* Killed by a signal: die of it again (no core file). */
			ck_sys4(SYS_prlimit64, 0, RLIMIT_CORE, zero, 0);
			ck_sys4(SYS_rt_sigprocmask, SIG_SETMASK, &none, 0, 8);
			ck_sys2(SYS_kill, ck_getpid(), sig);
			ck_exit_group(128 + sig);
		}
		default:
			ck__die("restorer: unexpected message before the layout", -22);
		}
	}
}

/* While ckrun fills the memory front to back, the dense regions (those
 * filled through huge pages) are faulted in here from the back: on a VM
 * the kernel's zeroing of each fresh huge page is the fill's largest cost
 * (the host backs the page as it is zeroed), and done here it runs beside
 * ckrun's copying, on the other core. The two meet; a page already there
 * is left as it is (MADV_POPULATE_WRITE never overwrites). */
#define CK__POPULATE_STEP (2ull << 20)
static void ck__populate(const struct ck_rst_region *rg, uint32_t n)
{
	for (uint32_t i = n; i-- > 0;) {
		uint64_t s = rg[i].start, e = rg[i].end;

		if (!rg[i].thp || !rg[i].fill)
			continue;
		while (e > s) {
			uint64_t b = (e - 1) & ~(CK__POPULATE_STEP - 1);
			long r;

			if (b < s)
				b = s;
			r = ck_sys3(SYS_madvise, b, e - b, 23 /* MADV_POPULATE_WRITE, Linux 5.14 */);
			if (r == -22 /* EINVAL: an older kernel */)
				return;
			if (r < 0)
				break; /* out of memory: ckrun's fill says so, if it must */
			e = b;
		}
	}
}

__attribute__((noreturn, used)) void ck_rst_main(void)
{
	const struct ck_rst_layout *l;
	const struct ck_rst_region *rg;
	const char *strings;
	uint64_t size, scratch_len;
	long r;

	do
		ck__attach();
	while (ck__tree_step());
	size = ck__msg.arg[0];
	scratch_len = (size + 4095) & ~4095ull;
	r = ck_mmap(CK_RST_SCRATCH, scratch_len, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (r < 0)
		ck__die("restorer: cannot map its scratch area", r);
	ck__send(CK_MSG_RST_MAPPED, 0, 0); /* ckrun writes the layout there */
	ck__recv(NULL, 0, NULL);
	if (ck__msg.type != CK_MSG_RST_FILLED)
		ck__die("restorer: expected the layout to be written", -22);
	l = (const struct ck_rst_layout *)CK_RST_SCRATCH;
	if (l->magic != CK_RST_MAGIC)
		ck__die("restorer: bad layout", -22);
	rg = (const struct ck_rst_region *)(l + 1);
	strings = (const char *)(rg + l->nregions);

	ck__place_fds(l->nfds);
	ck__place_specials(l);
	for (uint32_t i = 0; i < l->nregions; i++)
		if (!(rg[i].flags & (CK_REG_VVAR | CK_REG_VSYSCALL | CK_REG_PLUGIN)) &&
		    (!(rg[i].flags & CK_REG_VDSO) || l->vdso_mode == 1))
			ck__map_region(&rg[i], strings);

	/* Shared-memory objects are mapped: their descriptors go. */
	for (uint32_t i = 0; i < l->nshared && i < CK_RST_MAX_SHARED; i++)
		ck_close((l->shared_fd ? l->shared_fd : CK_RST_SHARED_FD) + (int)i);

	ck__send(CK_MSG_RST_MAPPED, 1, 0);
	ck__populate(rg, l->nregions);
	ck__recv(NULL, 0, NULL);
	if (ck__msg.type != CK_MSG_RST_FILLED)
		ck__die("restorer: expected the memory to be filled", -22);

	if (l->vdso_mode == 1)
		ck__write_trampolines(l);
	/* Filled: where the job gave no advice, later faults get small pages
	 * again (the pages already filled stay huge). Wipe-on-fork only now:
	 * the fill is not a fork, but the mark is the job's. */
	for (uint32_t i = 0; i < l->nregions; i++) {
		if (rg[i].thp && !(rg[i].flags & CK_REG_ADV_HUGE))
			(void)ck_sys3(SYS_madvise, rg[i].start, rg[i].end - rg[i].start, MADV_NOHUGEPAGE);
		if (rg[i].flags & CK_REG_ADV_WIPEONFORK)
			(void)ck_sys3(SYS_madvise, rg[i].start, rg[i].end - rg[i].start, MADV_WIPEONFORK);
	}
	for (uint32_t i = 0; i < l->nregions; i++) {
		if (rg[i].flags & (CK_REG_VVAR | CK_REG_VSYSCALL | CK_REG_PLUGIN))
			continue;
		if ((rg[i].flags & CK_REG_VDSO) && l->vdso_mode != 1)
			continue;
		r = ck_mprotect(rg[i].start, rg[i].end - rg[i].start, (int)rg[i].prot);
		if (r < 0)
			ck__die("restorer: cannot set a region's protection", r);
	}
	{
		struct prctl_mm_map mm;
		ck_memset(&mm, 0, sizeof(mm));
		mm.start_code = l->start_code;
		mm.end_code = l->end_code;
		mm.start_data = l->start_data;
		mm.end_data = l->end_data;
		mm.start_brk = l->start_brk;
		mm.brk = l->brk;
		mm.start_stack = l->start_stack;
		mm.arg_start = l->arg_start;
		mm.arg_end = l->arg_end;
		mm.env_start = l->env_start;
		mm.env_end = l->env_end;
		mm.auxv = (__u64 *)(uintptr_t)l->auxv;
		mm.auxv_size = l->auxv_size;
		mm.exe_fd = (uint32_t)-1;
		r = ck_sys5(SYS_prctl, PR_SET_MM, PR_SET_MM_MAP, &mm, sizeof(mm), 0);
		if (r < 0)
			ck__die("restorer: cannot set the memory layout fields (PR_SET_MM_MAP)", r);
	}
	{
		uint64_t all = ~0ull;
		ck_sys4(SYS_rt_sigprocmask, SIG_SETMASK, &all, 0, 8);
	}
	/* Into the restored image; the restart code unmaps us. */
	{
		uint64_t base = (uint64_t)(uintptr_t)__executable_start;
		uint64_t len = CK_RST_SCRATCH + scratch_len - base;
		__asm__ volatile("movq %0, %%rsp\n\t"
				 "jmpq *%1\n\t"
				 :
				 : "r"(l->restart_stack), "r"(l->restart_entry), "D"(l->restart_arg), "S"(base),
				   "d"(len), "c"((uint64_t)CK_RST_CTL_MAGIC << 32 | (uint32_t)ck__ctl)
				 : "memory");
	}
	__builtin_unreachable();
}
