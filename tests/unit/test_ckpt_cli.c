/* The ckpt tool end to end on a file store built with the chunk writer:
 * ls, verify, inspect, cp, corruption, rm, gc, usage errors. */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <libgen.h>
#include <limits.h>
#include <sys/wait.h>

#include "launcher/image/chunkio.h"
#include "launcher/common/ck_err.h"
#include "launcher/store/joblock.h"
#include "launcher/image/manifest.h"
#include "tests/unit/tmpdir.h"
#include "tests/unit/unit.h"

static char ckpt_bin[PATH_MAX], *tmp;
static char out[65536], err[4096];

static int mem_read(void *arg, uint64_t off, void *buf, size_t len)
{
	memcpy(buf, (uint8_t *)arg + off, len);
	return 0;
}

static void slurp(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, len - 1, f) : 0;

	buf[n] = 0;
	if (f)
		fclose(f);
}

/* Runs ckpt with args (a shell word list); returns its exit status. */
static int run(const char *args)
{
	char *cmd, o[PATH_MAX], e[PATH_MAX];
	int st;

	snprintf(o, sizeof(o), "%s/out", tmp);
	snprintf(e, sizeof(e), "%s/err", tmp);
	if (asprintf(&cmd, "cd %s && CKPT_STORE= %s %s >%s 2>%s", tmp, ckpt_bin, args, o, e) < 0)
		return -1;
	st = system(cmd);
	free(cmd);
	slurp(o, out, sizeof(out));
	slurp(e, err, sizeof(err));
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The file of pack NNNN of round SEQ in store dir st (its name ends in
 * its writer's random id). */
static void pack_path(const char *st, unsigned seq, unsigned no, char *buf, size_t len)
{
	char pat[PATH_MAX];
	glob_t g;

	snprintf(pat, sizeof(pat), "%s/%s/demo/packs/%08u-%04u-*.pack", tmp, st, seq, no);
	buf[0] = 0;
	if (glob(pat, 0, NULL, &g) == 0 && g.gl_pathc == 1)
		snprintf(buf, len, "%s", g.gl_pathv[0]);
	else
		fprintf(stderr, "no single pack matches %s\n", pat);
	globfree(&g);
}

static int one_line(const char *s)
{
	const char *nl = strchr(s, '\n');

	return nl && nl[1] == 0 && !strncmp(s, "ckpt: ", 6);
}

static void make_round(struct ck_store *s, uint64_t seq, const struct ck_manifest *prev, uint8_t *data, size_t len)
{
	struct ck_writer_opts o = {.threads = 2, .pack_size = 1 << 20};
	struct ck_manifest *m = calloc(1, sizeof(*m));
	struct ck_writer *w;
	struct ck_region *g;

	m->seq = seq;
	m->job = strdup("demo");
	m->cwd = strdup("/work");
	m->argc = 1;
	m->argv = calloc(1, sizeof(char *));
	m->argv[0] = strdup("./train");
	m->time_ns = 1796000000000000000ull + seq;
	m->duration_ns = 1500000000;
	m->nprocs = 1;
	m->procs = calloc(1, sizeof(*m->procs));
	m->procs[0].pid = 1000;
	m->procs[0].ppid = 1;
	m->procs[0].exe = strdup("/usr/bin/train");
	m->procs[0].desc = malloc(5);
	memcpy(m->procs[0].desc, "abcde", 5);
	m->procs[0].desc_len = 5;
	m->procs[0].nregions = 1;
	m->procs[0].regions = g = calloc(1, sizeof(*g));
	g->start = 0x7f0000000000ull;
	g->end = g->start + len;
	g->prot = 3;
	g->path = strdup("[heap]");
	g->flags = CK_REG_HEAP;
	m->nskips = 1;
	m->skips = calloc(1, sizeof(*m->skips));
	m->skips[0].pid = 1000;
	m->skips[0].what = strdup("/dev/nvidia0");
	m->skips[0].why = strdup("device");
	CHECK_EQ_INT(ck_writer_open(s, "demo", seq, prev, &o, &w), 0);
	CHECK_EQ_INT(ck_writer_add(w, len, mem_read, data, &g->first_chunk, &g->nchunks), 0);
	CHECK_EQ_INT(ck_writer_finish(w, m), 0);
	CHECK_EQ_INT(ck_manifest_commit(s, m), 0);
	ck_manifest_free(m);
}

void ck_unit_run(void)
{
	char self[PATH_MAX], args[4096], path[PATH_MAX];
	struct ck_store *s = NULL;
	struct ck_manifest *m1 = NULL;
	size_t len = 3 * 1024 * 1024, i;
	uint8_t *data = malloc(len);
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	/* The tool sits two levels above the unit tests in the build tree. */
	self[n > 0 ? n : 0] = 0;
	snprintf(ckpt_bin, sizeof(ckpt_bin), "%s/../../ckpt", dirname(self));
	if (access(ckpt_bin, X_OK)) {
		fprintf(stderr, "no ckpt binary at %s\n", ckpt_bin);
		ck_unit_failures++;
		return;
	}
	tmp = ck_unit_tmpdir();
	snprintf(path, sizeof(path), "%s/st", tmp);
	CHECK_EQ_INT(ck_store_open(path, NULL, &s), 0);
	for (i = 0; i < len; i++)
		data[i] = (uint8_t)(i * 2654435761u >> 13);
	memset(data + len / 2, 0, CK_CHUNK_SIZE);
	make_round(s, 1, NULL, data, len);
	CHECK_EQ_INT(ck_manifest_load(s, "demo", 1, &m1), 0);
	data[100] ^= 1;
	make_round(s, 2, m1, data, len);

	CHECK_EQ_INT(run("ls --store st"), 0);
	CHECK(strstr(out, "demo") != NULL);
	CHECK_EQ_INT(run("ls --store st --json"), 0);
	CHECK(strstr(out, "\"job\":\"demo\",\"checkpoints\":2,\"latest\":2") != NULL);
	CHECK_EQ_INT(run("ls --store st demo"), 0);
	CHECK(strstr(out, "\n1 ") && strstr(out, "\n2 "));
	CHECK_EQ_INT(run("ls --store st --json demo"), 0);
	CHECK(strstr(out, "\"seq\":2,\"ok\":true") != NULL);
	CHECK_EQ_INT(run("verify --store st demo"), 0);
	CHECK(strstr(out, "ok demo@2") != NULL);
	snprintf(args, sizeof(args), "verify --store file://%s/st demo@1", tmp);
	CHECK_EQ_INT(run(args), 0);
	CHECK_EQ_INT(run("inspect --store st demo@2"), 0);
	CHECK(strstr(out, "process 1000") && strstr(out, "[heap]") && strstr(out, "/dev/nvidia0"));
	CHECK_EQ_INT(run("cp st st2 demo"), 0);
	CHECK_EQ_INT(run("verify --store st2 demo@1"), 0);
	CHECK_EQ_INT(run("verify --store st2 demo@2"), 0);
	CHECK_EQ_INT(run("cp st st2 demo@2"), 0);
	CHECK(strstr(out, "already") != NULL);
	CHECK(strstr(out, "; 0 bytes sent\n") != NULL);
	/* The delta: with checkpoint 1 there, checkpoint 2 (one byte changed)
	 * sends the pack of its one new chunk and its manifest alone. */
	CHECK_EQ_INT(run("cp st st5 demo@1"), 0);
	CHECK_EQ_INT(run("cp st st5 demo@2"), 0);
	{
		unsigned long long sent = 0, one = 0, all = 0, there = 0;
		const char *l = strstr(out, "demo@2: copied to ");
		const char *t = strstr(out, "already present; ");

		CHECK(l && sscanf(strchr(l + 18, ':') + 2, "%llu of its %llu bytes sent", &one, &all) == 2);
		CHECK(l && strstr(l, "; 1 pack, ") &&
		      sscanf(strstr(l, "; 1 pack, ") + 10, "%llu already there", &there) == 1 && there >= 1);
		CHECK(t && sscanf(t, "already present; %llu bytes sent", &sent) == 1);
		/* a chunk of 256 KiB compresses; the whole image is 3 MiB */
		CHECK(sent == one && sent > 0 && sent < 600 * 1024);
		/* checkpoint 1, committed there, names the pack: not read back */
		CHECK(strstr(l, "already there, 0 B read back") != NULL);
		CHECK(all > 4 * sent);
		if (ck_unit_failures)
			fprintf(stderr, "%s", out);
	}
	CHECK_EQ_INT(run("verify --store st5 demo@2"), 0);
	/* a profile names an S3 site: given for a directory store it is an error */
	CHECK_EQ_INT(run("cp --from-profile a st st6 demo"), 64);
	CHECK(one_line(err) && strstr(err, "--from-profile"));
	CHECK_EQ_INT(run("cp --to-profile b st st6 demo"), 64);
	CHECK(one_line(err) && strstr(err, "--to-profile"));
	CHECK_EQ_INT(run("ls --from-profile a --store st"), 64);
	/* A same-size but damaged pack at the destination that no checkpoint
	 * there names (a killed copy's) is checked, and replaced. */
	CHECK_EQ_INT(run("cp st st3 demo@1"), 0);
	pack_path("st3", 1, 1, path, sizeof(path));
	{
		int fd = open(path, O_RDWR);

		CHECK_EQ_INT(pwrite(fd, "\x55\x55\x55", 3, 0), 3);
		close(fd);
		snprintf(path, sizeof(path), "%s/st3/demo/manifests/00000001", tmp);
		unlink(path);
	}
	CHECK_EQ_INT(run("cp st st3 demo@1"), 0);
	CHECK(strstr(out, "1 pack copied") != NULL);
	CHECK_EQ_INT(run("verify --store st3 demo@1"), 0);
	snprintf(path, sizeof(path), "%s/st3", tmp);
	ck_unit_rmtree(strdup(path));

	/* Corrupt one byte of a round-2 pack (the changed chunk lives there). */
	pack_path("st", 2, 1, path, sizeof(path));
	{
		int fd = open(path, O_RDWR);
		uint8_t b = 0;

		CHECK(fd >= 0);
		CHECK_EQ_INT(pread(fd, &b, 1, 7), 1);
		b ^= 0x10;
		CHECK_EQ_INT(pwrite(fd, &b, 1, 7), 1);
		close(fd);
	}
	CHECK_EQ_INT(run("verify --store st demo@2"), 2);
	CHECK(one_line(err));
	CHECK(strstr(err, "ckpt: checkpoint demo@2: chunk 0 (pack packs/00000002-0001-") != NULL);
	CHECK(strstr(err, ".pack, offset 0): ") != NULL);
	CHECK_EQ_INT(run("verify --store st --json demo@2"), 2);
	CHECK(strstr(out, "\"ok\":false") != NULL);
	/* A copy of a corrupt checkpoint stops before its manifest. */
	CHECK_EQ_INT(run("cp st st3 demo@2"), 2);
	CHECK(one_line(err));
	snprintf(path, sizeof(path), "%s/st3/demo/manifests/00000002", tmp);
	CHECK(access(path, F_OK) != 0);
	/* A truncated pack, then a missing one: named, and no manifest. */
	{
		char pack[600], keep[640];

		pack_path("st", 1, 1, pack, sizeof(pack));
		snprintf(keep, sizeof(keep), "%s.keep", pack);
		CHECK_EQ_INT(link(pack, keep), 0);
		CHECK_EQ_INT(unlink(pack), 0);
		{
			int in = open(keep, O_RDONLY), o = open(pack, O_WRONLY | O_CREAT | O_EXCL, 0600);
			char b[8];

			CHECK(in >= 0 && o >= 0);
			CHECK_EQ_INT(read(in, b, sizeof(b)), 8);
			CHECK_EQ_INT(write(o, b, sizeof(b)), 8);
			close(in);
			close(o);
		}
		CHECK_EQ_INT(run("cp st st4 demo@1"), 2);
		CHECK(one_line(err));
		CHECK(strstr(err, "pack truncated") != NULL);
		CHECK(strstr(err, "00000001-0001-") != NULL);
		snprintf(path, sizeof(path), "%s/st4/demo/manifests/00000001", tmp);
		CHECK(access(path, F_OK) != 0);
		CHECK_EQ_INT(unlink(pack), 0);
		CHECK_EQ_INT(run("cp st st4 demo@1"), 2);
		CHECK(one_line(err));
		CHECK(strstr(err, "pack missing") != NULL);
		CHECK(access(path, F_OK) != 0);
		CHECK_EQ_INT(rename(keep, pack), 0);
		CHECK_EQ_INT(run("cp st st4 demo@1"), 0);
		CHECK_EQ_INT(run("verify --store st4 demo@1"), 0);
		snprintf(path, sizeof(path), "%s/st4", tmp);
		ck_unit_rmtree(strdup(path));
	}

	/* rm and gc */
	CHECK_EQ_INT(run("rm --store st2 demo@1"), 0);
	CHECK_EQ_INT(run("ls --store st2 demo"), 0);
	CHECK(!strstr(out, "\n1 ") && strstr(out, "\n2 "));
	CHECK_EQ_INT(run("verify --store st2 demo"), 0);
	/* demo@2 of st has a flipped byte (above): gc --keep 1 does not count
	 * it, so the good demo@1 stays; both are said, and the status is 2. */
	CHECK_EQ_INT(run("gc --store st --keep 1 demo"), 2);
	CHECK(strstr(out, "removed 0 checkpoints") != NULL);
	CHECK(strstr(err, "damaged checkpoint 2 kept and not counted") != NULL);
	CHECK(strstr(err, "checkpoint demo@2: chunk 0 (pack packs/00000002-0001-") != NULL);
	CHECK_EQ_INT(run("verify --store st demo@1"), 0);
	/* st2 holds demo@2 only, good: keep 1 removes nothing and says so. */
	CHECK_EQ_INT(run("gc --store st2 --keep 1 demo"), 0);
	CHECK(strstr(out, "removed 0 checkpoints and 0 packs") != NULL);
	CHECK_EQ_INT(run("rm --store st2 demo"), 0);
	CHECK_EQ_INT(run("ls --store st2 demo"), 2);
	CHECK(one_line(err));

	/* A chunk at an absurd offset (a damaged or forged manifest that
	 * still checks out): corrupt, status 2, like any read past a pack. */
	{
		struct ck_manifest *bad = NULL;

		CHECK_EQ_INT(ck_manifest_load(s, "demo", 1, &bad), 0);
		if (bad) {
			bad->seq = 9;
			bad->chunks[0].off = (1ull << 63) + 5;
			CHECK_EQ_INT(ck_manifest_commit(s, bad), 0);
			ck_manifest_free(bad);
		}
		CHECK_EQ_INT(run("verify --store st demo@9"), 2);
		CHECK(one_line(err));
		CHECK(strstr(err, "demo@9: chunk 0") != NULL);
		CHECK_EQ_INT(run("rm --store st demo@9"), 0);
	}
	/* A store that does not exist is not an empty one. */
	CHECK_EQ_INT(run("ls --store no-such-store"), 69);
	CHECK(one_line(err) && strstr(err, "no-such-store: no such directory"));
	CHECK_EQ_INT(run("ls --store no-such-store demo"), 69);
	CHECK(access("no-such-store", F_OK) != 0);
	/* rm and gc leave a job alone while its writer holds it, naming the
	 * holder, unless --force; ckpt unlock cannot break a file lock. */
	{
		struct ck_joblock *l = NULL;
		char who[64];

		snprintf(who, sizeof(who), "held by ckrun pid %d on host", (int)getpid());
		CHECK_EQ_INT(ck_joblock_acquire(s, "demo", "ckrun", 0, &l), 0);
		CHECK_EQ_INT(run("rm --store st demo@1"), 69);
		CHECK(one_line(err) && strstr(err, who) && strstr(err, "rm refused"));
		CHECK_EQ_INT(run("gc --store st --keep 1 demo"), 69);
		CHECK(one_line(err) && strstr(err, who));
		CHECK_EQ_INT(run("unlock --store st demo"), 69);
		CHECK(one_line(err) && strstr(err, who));
		CHECK_EQ_INT(run("ls --store st demo"), 0); /* readers need no lock */
		CHECK(strstr(out, "\n1 ") != NULL);
		CHECK_EQ_INT(run("gc --store st --force demo"), 0);
		CHECK(strstr(err, "going on (--force)") != NULL);
		/* a copy into the job is a writer too */
		CHECK_EQ_INT(run("cp st st demo@1"), 69);
		CHECK(one_line(err) && strstr(err, who));
		ck_joblock_release(l);
		CHECK_EQ_INT(run("unlock --store st demo"), 0);
		CHECK(strstr(out, "not locked") != NULL);
	}

	/* Usage and store errors: one line, documented statuses. */
	CHECK_EQ_INT(run("frobnicate"), 64);
	CHECK(one_line(err));
	CHECK_EQ_INT(run("verify --store st"), 64);
	CHECK_EQ_INT(run("verify --store st ../x"), 64);
	CHECK_EQ_INT(run("verify --store st demo@0"), 64);
	CHECK_EQ_INT(run("verify --store st demo@"), 64);
	/* an '@' not followed by digits alone is part of a job's name */
	CHECK_EQ_INT(run("verify --store st demo@zz"), 2);
	CHECK(strstr(err, "demo%40zz") != NULL);
	CHECK_EQ_INT(run("gc --store st --keep 0 demo"), 64);
	CHECK_EQ_INT(run("ls --store ftp://x/y"), 64);
	CHECK(one_line(err));
	CHECK_EQ_INT(run("verify --store st nosuchjob"), 2);
	CHECK(one_line(err));
	CHECK_EQ_INT(run("checkpoint nosuchjob"), 69);
	CHECK(one_line(err));
	CHECK_EQ_INT(run("--help"), 0);
	/* export-core and inspect --backtrace (the rest in 28-inspect.sh) */
	CHECK_EQ_INT(run("export-core --store st demo"), 64);
	CHECK(one_line(err) && strstr(err, "-o FILE"));
	CHECK_EQ_INT(run("export-core --store st --pid 0 -o core demo"), 64);
	CHECK_EQ_INT(run("ls --store st --pid 1 demo"), 64);
	CHECK_EQ_INT(run("inspect --store st -o x demo"), 64);
	CHECK_EQ_INT(run("export-core --store st --pid 4242 -o core demo@2"), 2);
	CHECK(one_line(err) && strstr(err, "no process 4242"));
	CHECK_EQ_INT(run("inspect --backtrace --store st nosuchjob"), 2);
	CHECK(one_line(err));
	snprintf(path, sizeof(path), "%s/core", tmp);
	CHECK_EQ_INT(access(path, F_OK), -1);

	ck_manifest_free(m1);
	ck_store_close(s);
	free(data);
	ck_unit_rmtree(tmp);
}
