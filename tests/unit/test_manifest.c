/* Manifest format: round trip, golden file, truncation and corruption
 * (all detected, never a crash), store operations and retention. */
#include <errno.h>
#include <openssl/evp.h>

#include "launcher/common/ck_err.h"
#include "launcher/image/manifest.h"
#include "tests/unit/sample_manifest.h"
#include "tests/unit/tmpdir.h"
#include "tests/unit/unit.h"

static void test_roundtrip(void)
{
	struct ck_manifest *m = ck_unit_sample_manifest(), *d = NULL;
	void *buf = NULL, *buf2 = NULL;
	size_t len = 0, len2 = 0;

	CHECK_EQ_INT(ck_manifest_encode(m, &buf, &len), 0);
	CHECK_EQ_INT(ck_manifest_decode(buf, len, &d), 0);
	if (!d)
		goto out;
	CHECK_EQ_INT(d->version, CK_MANIFEST_VERSION);
	CHECK_EQ_INT(d->seq, 3);
	CHECK_EQ_INT(d->time_ns, m->time_ns);
	CHECK_EQ_INT(d->duration_ns, m->duration_ns);
	CHECK_EQ_INT(d->frozen_ns, m->frozen_ns);
	CHECK_EQ_INT(d->logical_bytes, m->logical_bytes);
	CHECK_EQ_INT(d->stored_bytes, m->stored_bytes);
	CHECK_EQ_STR(d->job, "sgd-42");
	CHECK_EQ_STR(d->cwd, "/home/u/run");
	CHECK_EQ_INT(d->argc, 4);
	CHECK_EQ_STR(d->argv[2], "90");
	CHECK_EQ_STR(d->argv[3], "");
	CHECK_EQ_INT(d->npacks, 2);
	CHECK_EQ_STR(d->packs[1], "packs/00000002-0001.pack");
	CHECK_EQ_INT(d->nchunks, 4);
	CHECK(!memcmp(d->chunks, m->chunks, 4 * sizeof(struct ck_chunk)));
	CHECK_EQ_INT(d->nprocs, 2);
	CHECK_EQ_INT(d->procs[0].pid, 1000);
	CHECK_EQ_INT(d->procs[0].ppid, 999);
	CHECK_EQ_STR(d->procs[0].exe, "/usr/bin/python3");
	CHECK(d->procs[1].exe == NULL);
	CHECK_EQ_INT(d->procs[0].restart_entry, 0x7f0000001000ull);
	CHECK_EQ_INT(d->procs[0].desc_len, 5);
	CHECK(!memcmp(d->procs[0].desc, "\x01\x02\x00\xff\x7f", 5));
	CHECK_EQ_INT(d->procs[0].nregions, 3);
	CHECK_EQ_INT(d->procs[0].regions[0].ino, 4242);
	CHECK_EQ_INT(d->procs[0].regions[1].first_chunk, 3);
	CHECK_EQ_STR(d->procs[0].regions[2].path, "[vdso]");
	CHECK_EQ_INT(d->procs[1].nregions, 0);
	CHECK_EQ_INT(d->nskips, 1);
	CHECK_EQ_STR(d->skips[0].why, "device file: reopened by the cuda plugin");
	CHECK_EQ_INT(ck_manifest_encode(d, &buf2, &len2), 0);
	CHECK(len == len2 && !memcmp(buf, buf2, len));
out:
	free(buf);
	free(buf2);
	ck_manifest_free(m);
	ck_manifest_free(d);
}

static void test_golden(void)
{
	const char *top = getenv("CKPT_TOP");
	struct ck_manifest *m = ck_unit_sample_manifest(), *d = NULL;
	char path[1024];
	void *gold, *buf = NULL;
	size_t glen = 0, len = 0;

	snprintf(path, sizeof(path), "%s/tests/golden/manifest-v1.bin", top && *top ? top : ".");
	gold = ck_unit_read_file(path, &glen);
	CHECK(gold != NULL);
	if (!gold)
		goto out;
	/* Decodes, and encodes back to the very same bytes. */
	CHECK_EQ_INT(ck_manifest_decode(gold, glen, &d), 0);
	if (d) {
		CHECK_EQ_STR(d->job, "sgd-42");
		CHECK_EQ_INT(d->nchunks, 4);
		CHECK_EQ_INT(ck_manifest_encode(d, &buf, &len), 0);
		CHECK(len == glen && !memcmp(buf, gold, glen));
		free(buf);
	}
	/* The sample itself still encodes to the golden bytes. */
	CHECK_EQ_INT(ck_manifest_encode(m, &buf, &len), 0);
	CHECK(len == glen && !memcmp(buf, gold, glen));
	free(buf);
out:
	free(gold);
	ck_manifest_free(m);
	ck_manifest_free(d);
}

static void test_corruption(void)
{
	struct ck_manifest *m = ck_unit_sample_manifest(), *d = NULL;
	static const uint8_t flips[] = {0x01, 0x80, 0xff};
	uint8_t *buf = NULL, *copy;
	size_t len = 0, i, f;
	int rc, undetected = 0;

	CHECK_EQ_INT(ck_manifest_encode(m, (void **)&buf, &len), 0);
	ck_manifest_free(m);
	if (!buf)
		return;
	/* Every truncation, into an exactly-sized heap buffer so ASan sees any
	 * read past the end. */
	for (i = 0; i < len; i++) {
		copy = malloc(i ? i : 1);
		memcpy(copy, buf, i);
		rc = ck_manifest_decode(copy, i, &d);
		if (rc != -EBADMSG)
			undetected++;
		if (i > 16 && !strstr(ck_err_msg(), "truncated at byte"))
			fprintf(stderr, "truncation to %zu: %s\n", i, ck_err_msg()), undetected++;
		ck_manifest_free(d);
		d = NULL;
		free(copy);
	}
	CHECK_EQ_INT(undetected, 0);
	copy = malloc(len);
	/* Every single-byte change is detected. */
	for (i = 0; i < len; i++) {
		for (f = 0; f < sizeof(flips); f++) {
			memcpy(copy, buf, len);
			copy[i] ^= flips[f];
			rc = ck_manifest_decode(copy, len, &d);
			if (rc != -EBADMSG)
				undetected++;
			ck_manifest_free(d);
			d = NULL;
		}
	}
	CHECK_EQ_INT(undetected, 0);
	/* The same changes with the checksum fixed up: the parser itself must
	 * hold (fail cleanly or decode), whatever the bytes say. */
	for (i = 8; i < len - CK_HASH_LEN; i++) {
		for (f = 0; f < sizeof(flips); f++) {
			memcpy(copy, buf, len);
			copy[i] ^= flips[f];
			EVP_Digest(copy, len - CK_HASH_LEN, copy + len - CK_HASH_LEN, NULL, EVP_sha256(), NULL);
			rc = ck_manifest_decode(copy, len, &d);
			CHECK(rc == 0 || rc == -EBADMSG);
			ck_manifest_free(d);
			d = NULL;
		}
	}
	/* Random garbage behind a valid magic and header. */
	srand(7);
	for (i = 0; i < 2000; i++) {
		size_t j;

		memcpy(copy, buf, len);
		for (j = 88; j < len - CK_HASH_LEN; j++)
			if (rand() % 8 == 0)
				copy[j] = (uint8_t)rand();
		EVP_Digest(copy, len - CK_HASH_LEN, copy + len - CK_HASH_LEN, NULL, EVP_sha256(), NULL);
		rc = ck_manifest_decode(copy, len, &d);
		CHECK(rc == 0 || rc == -EBADMSG);
		ck_manifest_free(d);
		d = NULL;
	}
	/* The messages name the problem. */
	memcpy(copy, buf, len);
	copy[0] = 'X';
	CHECK_EQ_INT(ck_manifest_decode(copy, len, &d), -EBADMSG);
	CHECK(strstr(ck_err_msg(), "bad magic") != NULL);
	memcpy(copy, buf, len);
	copy[8] = 9;
	CHECK_EQ_INT(ck_manifest_decode(copy, len, &d), -EBADMSG);
	CHECK(strstr(ck_err_msg(), "unsupported version 9") != NULL);
	memcpy(copy, buf, len);
	copy[len / 2] ^= 1;
	CHECK_EQ_INT(ck_manifest_decode(copy, len, &d), -EBADMSG);
	CHECK(strstr(ck_err_msg(), "checksum mismatch") != NULL);
	CHECK_EQ_INT(ck_manifest_decode(buf, len - 100, &d), -EBADMSG);
	CHECK(strstr(ck_err_msg(), "truncated at byte") != NULL);
	free(copy);
	free(buf);
}

/* Well-formed bytes that describe something unsafe are refused too. */
static void test_semantics(void)
{
	struct ck_manifest *m, *d = NULL;
	void *buf = NULL;
	size_t len = 0;

	m = ck_unit_sample_manifest();
	m->procs[0].regions[1].end = m->procs[0].regions[1].start + 100; /* smaller than its chunk */
	CHECK_EQ_INT(ck_manifest_encode(m, &buf, &len), 0);
	CHECK_EQ_INT(ck_manifest_decode(buf, len, &d), -EBADMSG);
	CHECK(strstr(ck_err_msg(), "exceed its size") != NULL);
	free(buf);
	ck_manifest_free(m);

	m = ck_unit_sample_manifest();
	m->chunks[0].pack = 2;
	CHECK_EQ_INT(ck_manifest_encode(m, &buf, &len), 0);
	CHECK_EQ_INT(ck_manifest_decode(buf, len, &d), -EBADMSG);
	CHECK(strstr(ck_err_msg(), "chunk 0: pack index 2 out of range") != NULL);
	free(buf);
	ck_manifest_free(m);

	m = ck_unit_sample_manifest();
	m->procs[0].regions[0].nchunks = 9;
	CHECK_EQ_INT(ck_manifest_encode(m, &buf, &len), 0);
	CHECK_EQ_INT(ck_manifest_decode(buf, len, &d), -EBADMSG);
	CHECK(strstr(ck_err_msg(), "chunk range out of bounds") != NULL);
	free(buf);
	ck_manifest_free(m);

	m = ck_unit_sample_manifest();
	m->chunks[1].clen = 5; /* a zero chunk with stored bytes */
	CHECK_EQ_INT(ck_manifest_encode(m, &buf, &len), 0);
	CHECK_EQ_INT(ck_manifest_decode(buf, len, &d), -EBADMSG);
	free(buf);
	ck_manifest_free(m);
	CHECK(d == NULL);
}

static void test_job_names(void)
{
	char longname[200];

	CHECK(ck_job_name_valid("sgd-42"));
	CHECK(ck_job_name_valid("a.b_C-9"));
	CHECK(!ck_job_name_valid(""));
	CHECK(!ck_job_name_valid(".hidden"));
	CHECK(!ck_job_name_valid("a/b"));
	CHECK(!ck_job_name_valid("a b"));
	CHECK(!ck_job_name_valid("a+b"));
	CHECK(!ck_job_name_valid(NULL));
	memset(longname, 'x', sizeof(longname));
	longname[128] = 0;
	CHECK(ck_job_name_valid(longname));
	longname[128] = 'x';
	longname[129] = 0;
	CHECK(!ck_job_name_valid(longname));
	/* store forms are canonical: %XX only for bytes that need it */
	CHECK(ck_job_name_valid("a%2Bb"));
	CHECK(!ck_job_name_valid("a%2bb"));
	CHECK(!ck_job_name_valid("a%41"));
	CHECK(!ck_job_name_valid("a%2F"));
	CHECK(!ck_job_name_valid("a%2"));
	CHECK(!ck_job_name_valid("a%"));
	CHECK(ck_job_name_valid("%2Ehidden"));
	{
		char enc[CK_JOB_NAME_MAX + 1], dec[CK_JOB_NAME_MAX + 1];

		CHECK_EQ_INT(ck_job_name_encode("sgd-42", enc, sizeof(enc)), 0);
		CHECK_EQ_STR(enc, "sgd-42");
		CHECK_EQ_INT(ck_job_name_encode("a+b c@1", enc, sizeof(enc)), 0);
		CHECK_EQ_STR(enc, "a%2Bb%20c%401");
		CHECK(ck_job_name_valid(enc));
		CHECK_EQ_INT(ck_job_name_decode(enc, dec, sizeof(dec)), 0);
		CHECK_EQ_STR(dec, "a+b c@1");
		CHECK_EQ_INT(ck_job_name_encode("a%2Bb", enc, sizeof(enc)), 0);
		CHECK_EQ_STR(enc, "a%252Bb");
		CHECK_EQ_INT(ck_job_name_encode(".x.y", enc, sizeof(enc)), 0);
		CHECK_EQ_STR(enc, "%2Ex.y");
		CHECK_EQ_INT(ck_job_name_encode("\xc3\xa9t\xc3\xa9", enc, sizeof(enc)), 0);
		CHECK_EQ_STR(enc, "%C3%A9t%C3%A9");
		CHECK_EQ_INT(ck_job_name_decode(enc, dec, sizeof(dec)), 0);
		CHECK_EQ_STR(dec, "\xc3\xa9t\xc3\xa9");
		CHECK_EQ_INT(ck_job_name_encode("a/b", enc, sizeof(enc)), -EINVAL);
		CHECK_EQ_INT(ck_job_name_encode("..", enc, sizeof(enc)), -EINVAL);
		CHECK_EQ_INT(ck_job_name_encode("", enc, sizeof(enc)), -EINVAL);
		memset(longname, '+', 42);
		longname[42] = 0;
		CHECK_EQ_INT(ck_job_name_encode(longname, enc, sizeof(enc)), 0);
		CHECK_EQ_INT(strlen(enc), 126);
		longname[43] = 0;
		longname[42] = '+';
		CHECK_EQ_INT(ck_job_name_encode(longname, enc, sizeof(enc)), -ENAMETOOLONG);
	}
	CHECK_EQ_INT(ck_pack_seq("packs/00000012-0003.pack"), 12);
	CHECK_EQ_INT(ck_pack_seq("job/packs/00000012-0003.pack"), 12);
	CHECK_EQ_INT(ck_pack_seq("packs/x-0003.pack"), 0);
	CHECK_EQ_INT(ck_pack_seq("packs/00000012-0003.tmp"), 0);
}

static struct ck_manifest *mk(uint64_t seq, const char *p1, const char *p2)
{
	struct ck_manifest *m = calloc(1, sizeof(*m));

	m->seq = seq;
	m->job = strdup("job");
	m->npacks = p2 ? 2 : 1;
	m->packs = calloc(2, sizeof(char *));
	m->packs[0] = strdup(p1);
	if (p2)
		m->packs[1] = strdup(p2);
	return m;
}

static int exists(struct ck_store *s, const char *key)
{
	uint64_t size;

	return ck_store_stat(s, key, &size) == 0;
}

static void test_store_ops(void)
{
	char *dir = ck_unit_tmpdir();
	struct ck_store *s = NULL;
	struct ck_manifest *m, *l = NULL;
	uint64_t *seqs = NULL;
	char **jobs = NULL;
	size_t n = 0, i;
	unsigned ndel = 0;

	CHECK_EQ_INT(ck_store_open(dir, NULL, &s), 0);
	if (!s)
		goto out;
	CHECK_EQ_INT(ck_manifest_load_latest(s, "job", &l), -ENOENT);
	/* Packs: 1-1 used by 1 and 2; 2-1 by 2 and 3; 3-1 by 3; 4-1 by 4;
	 * 1-2 by nobody; 5-1 belongs to a round in flight. */
	ck_store_put(s, "job/packs/00000001-0001.pack", "a", 1, 0);
	ck_store_put(s, "job/packs/00000001-0002.pack", "bb", 2, 0);
	ck_store_put(s, "job/packs/00000002-0001.pack", "c", 1, 0);
	ck_store_put(s, "job/packs/00000003-0001.pack", "d", 1, 0);
	ck_store_put(s, "job/packs/00000004-0001.pack", "e", 1, 0);
	ck_store_put(s, "job/packs/00000005-0001.pack", "f", 1, 0);
	m = mk(1, "packs/00000001-0001.pack", NULL);
	CHECK_EQ_INT(ck_manifest_commit(s, m), 0);
	/* A committed manifest is never replaced. */
	CHECK_EQ_INT(ck_manifest_commit(s, m), -EEXIST);
	ck_manifest_free(m);
	m = mk(2, "packs/00000001-0001.pack", "packs/00000002-0001.pack");
	CHECK_EQ_INT(ck_manifest_commit(s, m), 0);
	ck_manifest_free(m);
	m = mk(3, "packs/00000002-0001.pack", "packs/00000003-0001.pack");
	CHECK_EQ_INT(ck_manifest_commit(s, m), 0);
	ck_manifest_free(m);
	m = mk(4, "packs/00000004-0001.pack", NULL);
	CHECK_EQ_INT(ck_manifest_commit(s, m), 0);
	ck_manifest_free(m);

	CHECK_EQ_INT(ck_manifest_list(s, "job", &seqs, &n), 0);
	CHECK_EQ_INT(n, 4);
	for (i = 0; i < n; i++)
		CHECK_EQ_INT(seqs[i], i + 1);
	free(seqs);
	CHECK_EQ_INT(ck_manifest_load_latest(s, "job", &l), 0);
	CHECK(l && l->seq == 4);
	ck_manifest_free(l);
	CHECK_EQ_INT(ck_manifest_load(s, "job", 9, &l), -ENOENT);
	CHECK_EQ_INT(ck_manifest_list(s, "../x", &seqs, &n), -EINVAL);
	CHECK_EQ_INT(ck_store_list_jobs(s, &jobs, &n), 0);
	CHECK_EQ_INT(n, 1);
	if (n)
		CHECK_EQ_STR(jobs[0], "job");
	for (i = 0; i < n; i++)
		free(jobs[i]);
	free(jobs);

	/* Unreferenced 1-2 goes; the in-flight 5-1 stays. */
	CHECK_EQ_INT(ck_store_gc_packs(s, "job", 4, &ndel, NULL), 0);
	CHECK_EQ_INT(ndel, 1);
	CHECK(!exists(s, "job/packs/00000001-0002.pack"));
	CHECK(exists(s, "job/packs/00000005-0001.pack"));

	/* Keep 2: manifests 1 and 2 go, and pack 1-1 with them; 2-1 is still
	 * referenced by 3. */
	CHECK_EQ_INT(ck_store_retain(s, "job", 2), 0);
	CHECK_EQ_INT(ck_manifest_list(s, "job", &seqs, &n), 0);
	CHECK_EQ_INT(n, 2);
	free(seqs);
	CHECK(!exists(s, "job/manifests/00000001"));
	CHECK(!exists(s, "job/packs/00000001-0001.pack"));
	CHECK(exists(s, "job/packs/00000002-0001.pack"));
	CHECK(exists(s, "job/packs/00000003-0001.pack"));
	CHECK(exists(s, "job/packs/00000004-0001.pack"));
	CHECK(exists(s, "job/packs/00000005-0001.pack"));
	CHECK_EQ_INT(ck_store_retain(s, "job", 0), -EINVAL);

	/* A corrupt newest manifest: it fails loudly, is not counted, and is
	 * never the reason a good one goes: keep 1 keeps 4 (the newest good
	 * one) and 6, removes 3, and collects no pack while 6 is there. */
	ck_store_put(s, "job/manifests/00000006", "garbage-garbage", 15, 0);
	CHECK_EQ_INT(ck_manifest_load_latest(s, "job", &l), -EBADMSG);
	CHECK(strstr(ck_err_msg(), "job@6") != NULL && strstr(ck_err_msg(), "bad magic") != NULL);
	{
		struct ck_retain_report rep;

		CHECK_EQ_INT(ck_store_retain_ex(s, "job", 1, NULL, &rep), 0);
		CHECK(rep.nremoved == 1 && rep.removed[0] == 3);
		CHECK(rep.nkept == 1 && rep.kept[0] == 4);
		CHECK(rep.ndamaged == 1 && rep.damaged[0] == 6);
		CHECK(strstr(rep.damaged_why, "bad magic") != NULL);
		CHECK_EQ_INT(rep.packs_held, 1);
		CHECK_EQ_INT(rep.npacks, 0);
		ck_retain_report_free(&rep);
	}
	CHECK(exists(s, "job/manifests/00000004") && exists(s, "job/manifests/00000006"));
	CHECK(!exists(s, "job/manifests/00000003"));
	CHECK(exists(s, "job/packs/00000003-0001.pack"));
	CHECK(ck_store_retain(s, "job", 1) < 0); /* packs held back: an error there */
	CHECK(exists(s, "job/manifests/00000004"));
	/* Holding the lock, a never-committed round's packs go even so (a
	 * manifest references only packs of its own sequence or earlier). */
	ck_store_put(s, "job/packs/00000007-0001-aa.pack", "g", 1, 0);
	{
		struct ck_retain_opts ro = {.flags = CK_RETAIN_OWNER};
		struct ck_retain_report rep;

		CHECK_EQ_INT(ck_store_retain_ex(s, "job", 0, &ro, &rep), 0);
		CHECK_EQ_INT(rep.npacks, 1); /* 7-1; 5-1 is below the corrupt 6: held */
		CHECK_EQ_INT(rep.packs_held, 1);
		ck_retain_report_free(&rep);
	}
	CHECK(!exists(s, "job/packs/00000007-0001-aa.pack") && exists(s, "job/packs/00000005-0001.pack"));
	CHECK(exists(s, "job/packs/00000004-0001.pack"));
	ck_store_close(s);
out:
	ck_unit_rmtree(dir);
}

/* The optional TREE section: round trip, and bad records refused. */
static void test_tree(void)
{
	struct ck_manifest *m = ck_unit_sample_manifest(), *d = NULL;
	/* (a zombie, and one that exited, made again for a connection) */
	struct ck_task t[4] = {{2, 1, 0, 0, 0, 0},
			       {3, 2, 3, 0, 0, 0},
			       {7, 2, 3, 0, CK_TASK_ZOMBIE | CK_TASK_MAKER, 0x8b00},
			       {9, 2, 0, 0, CK_TASK_MAKER, 0}};
	void *buf = NULL;
	size_t len = 0;

	struct ck_sysv_shm shm = {5, 0x1234, 0600, CK_SYSV_DEST, 0, 0, 65536, 3, 1, 0}; /* chunk 3: 4096 bytes */
	m->tasks = malloc(sizeof(t));
	memcpy(m->tasks, t, sizeof(t));
	m->ntasks = 4;
	m->shms = malloc(sizeof(shm));
	memcpy(m->shms, &shm, sizeof(shm));
	m->nshms = 1;
	CHECK_EQ_INT(ck_manifest_encode(m, &buf, &len), 0);
	CHECK_EQ_INT(ck_manifest_decode(buf, len, &d), 0);
	if (d) {
		CHECK_EQ_INT(d->ntasks, 4);
		CHECK(d->ntasks == 4 && !memcmp(d->tasks, t, sizeof(t)));
		CHECK(d->nshms == 1 && !memcmp(d->shms, &shm, sizeof(shm)));
		ck_manifest_free(d);
		d = NULL;
	}
	free(buf);
	/* pid 1 is init's, never the job's; unknown flags are refused */
	m->tasks[1].pid = 1;
	CHECK_EQ_INT(ck_manifest_encode(m, &buf, &len), 0);
	CHECK_EQ_INT(ck_manifest_decode(buf, len, &d), -EBADMSG);
	CHECK(strstr(ck_err_msg(), "task 1") != NULL);
	free(buf);
	m->tasks[1].pid = 3;
	m->tasks[2].flags = 0x4;
	CHECK_EQ_INT(ck_manifest_encode(m, &buf, &len), 0);
	CHECK_EQ_INT(ck_manifest_decode(buf, len, &d), -EBADMSG);
	free(buf);
	/* a segment whose chunks are not in the table */
	m->tasks[2].flags = 0;
	m->shms[0].first_chunk = 1000;
	CHECK_EQ_INT(ck_manifest_encode(m, &buf, &len), 0);
	CHECK_EQ_INT(ck_manifest_decode(buf, len, &d), -EBADMSG);
	CHECK(strstr(ck_err_msg(), "SysV") != NULL);
	free(buf);
	/* chunks larger than the segment (a restore would write past it) */
	m->shms[0].first_chunk = 0;
	CHECK_EQ_INT(ck_manifest_encode(m, &buf, &len), 0);
	CHECK_EQ_INT(ck_manifest_decode(buf, len, &d), -EBADMSG);
	CHECK(strstr(ck_err_msg(), "bytes of chunks") != NULL);
	free(buf);
	/* a message queue: its size limit in pad comes back; a queue is never
	 * marked for removal, and its chunks hold exactly its size */
	m->shms[0].first_chunk = 3;
	m->shms[0].size = 4096;
	m->shms[0].flags = CK_SYSV_MSG;
	m->shms[0].pad = 4000;
	CHECK_EQ_INT(ck_manifest_encode(m, &buf, &len), 0);
	CHECK_EQ_INT(ck_manifest_decode(buf, len, &d), 0);
	CHECK(d && d->nshms == 1 && d->shms[0].flags == CK_SYSV_MSG && d->shms[0].pad == 4000);
	ck_manifest_free(d);
	d = NULL;
	free(buf);
	m->shms[0].flags = CK_SYSV_MSG | CK_SYSV_DEST;
	CHECK_EQ_INT(ck_manifest_encode(m, &buf, &len), 0);
	CHECK_EQ_INT(ck_manifest_decode(buf, len, &d), -EBADMSG);
	free(buf);
	m->shms[0].flags = CK_SYSV_MSG;
	m->shms[0].size = 8192;
	CHECK_EQ_INT(ck_manifest_encode(m, &buf, &len), 0);
	CHECK_EQ_INT(ck_manifest_decode(buf, len, &d), -EBADMSG);
	free(buf);
	ck_manifest_free(m);
}

/* The optional FILE section (files whose pages CK_REG_FILEPAGES regions
 * map) and its digests (FDIG): round trip, absent when empty (older
 * images' bytes unchanged), a relative path refused. */
static void test_files(void)
{
	struct ck_manifest *m = ck_unit_sample_manifest(), *d = NULL;
	void *buf = NULL, *plain = NULL;
	size_t len = 0, plain_len = 0;

	CHECK_EQ_INT(ck_manifest_encode(m, &plain, &plain_len), 0);
	m->files = calloc(2, sizeof(*m->files));
	m->files[0] = (struct ck_mfile){.path = strdup("/usr/lib/libx.so"),
					.dev = 0x803,
					.ino = 42,
					.size = 8192,
					.mtime_ns = 1700000000123456789LL,
					.ctime_ns = 1700000001000000000LL};
	m->files[1] = (struct ck_mfile){
		.path = strdup("/opt/y"), .dev = 1, .ino = 2, .size = 3, .mtime_ns = -4, .ctime_ns = 5};
	m->nfiles = 2;
	/* no digest known: no FDIG section */
	CHECK_EQ_INT(ck_manifest_encode(m, &buf, &len), 0);
	CHECK_EQ_INT(ck_manifest_decode(buf, len, &d), 0);
	CHECK(d && d->nfiles == 2 && !d->files[0].has_digest && !d->files[1].has_digest);
	ck_manifest_free(d);
	d = NULL;
	free(buf);
	buf = NULL;
	for (int i = 0; i < CK_HASH_LEN; i++)
		m->files[0].digest[i] = (uint8_t)(0xa0 + i);
	m->files[0].has_digest = 1;
	m->procs[0].regions[0].flags |= CK_REG_FILEPAGES | CK_REG_NODATA;
	CHECK_EQ_INT(ck_manifest_encode(m, &buf, &len), 0);
	CHECK(len > plain_len);
	CHECK_EQ_INT(ck_manifest_decode(buf, len, &d), 0);
	if (d) {
		CHECK_EQ_INT(d->nfiles, 2);
		if (d->nfiles == 2) {
			CHECK(!strcmp(d->files[0].path, "/usr/lib/libx.so") && d->files[0].dev == 0x803 &&
			      d->files[0].ino == 42 && d->files[0].size == 8192 &&
			      d->files[0].mtime_ns == 1700000000123456789LL && d->files[0].ctime_ns == 1700000001000000000LL);
			CHECK(!strcmp(d->files[1].path, "/opt/y") && d->files[1].mtime_ns == -4);
			CHECK(d->files[0].has_digest && !memcmp(d->files[0].digest, m->files[0].digest, CK_HASH_LEN));
			CHECK(!d->files[1].has_digest);
		}
		CHECK(d->procs[0].regions[0].flags & CK_REG_FILEPAGES);
		ck_manifest_free(d);
		d = NULL;
	}
	free(buf);
	free(m->files[1].path);
	m->files[1].path = strdup("opt/y");
	CHECK_EQ_INT(ck_manifest_encode(m, &buf, &len), 0);
	CHECK_EQ_INT(ck_manifest_decode(buf, len, &d), -EBADMSG);
	CHECK(strstr(ck_err_msg(), "mapped file 1") != NULL);
	free(buf);
	free(plain);
	ck_manifest_free(m);
}

/* The optional CLCK section (the job's clocks at the cut): round trip,
 * absent without clocks (older images' bytes unchanged), a short one
 * refused. */
static void test_clocks(void)
{
	struct ck_manifest *m = ck_unit_sample_manifest(), *d = NULL;
	void *buf = NULL, *plain = NULL;
	size_t len = 0, plain_len = 0;

	CHECK_EQ_INT(ck_manifest_encode(m, &plain, &plain_len), 0);
	CHECK_EQ_INT(ck_manifest_decode(plain, plain_len, &d), 0);
	CHECK(d && !d->has_clocks);
	ck_manifest_free(d);
	d = NULL;
	m->has_clocks = 1;
	m->mono_ns = 123456789012345ULL;
	m->boot_ns = 223456789012345ULL;
	CHECK_EQ_INT(ck_manifest_encode(m, &buf, &len), 0);
	CHECK_EQ_INT(len, plain_len + 16 + 16); /* section header + two u64 */
	CHECK_EQ_INT(ck_manifest_decode(buf, len, &d), 0);
	CHECK(d && d->has_clocks && d->mono_ns == 123456789012345ULL && d->boot_ns == 223456789012345ULL);
	ck_manifest_free(d);
	free(buf);
	free(plain);
	ck_manifest_free(m);
}

/* The optional LINE section (the run's lineage): round trip, absent when
 * not set, and the decoded bytes the ones encoded. */
static void test_lineage(void)
{
	struct ck_manifest *m = ck_unit_sample_manifest(), *d = NULL;
	void *buf = NULL, *plain = NULL;
	size_t len = 0, plain_len = 0;

	CHECK_EQ_INT(ck_manifest_encode(m, &plain, &plain_len), 0);
	CHECK_EQ_INT(ck_manifest_decode(plain, plain_len, &d), 0);
	CHECK(d && !d->has_lineage);
	ck_manifest_free(d);
	d = NULL;
	m->has_lineage = 1;
	for (size_t i = 0; i < sizeof(m->lineage); i++)
		m->lineage[i] = (uint8_t)(0xa0 + i);
	CHECK_EQ_INT(ck_manifest_encode(m, &buf, &len), 0);
	CHECK_EQ_INT(len, plain_len + 16 + CK_LINEAGE_LEN); /* section header + the bytes */
	CHECK_EQ_INT(ck_manifest_decode(buf, len, &d), 0);
	CHECK(d && d->has_lineage && !memcmp(d->lineage, m->lineage, sizeof(m->lineage)));
	ck_manifest_free(d);
	free(buf);
	free(plain);
	ck_manifest_free(m);
}

/* The optional LPID section (the pid namespace's last pid): round trip,
 * absent when not set, a pid below 1 refused. */
static void test_last_pid(void)
{
	struct ck_manifest *m = ck_unit_sample_manifest(), *d = NULL;
	void *buf = NULL, *plain = NULL;
	size_t len = 0, plain_len = 0;

	CHECK_EQ_INT(ck_manifest_encode(m, &plain, &plain_len), 0);
	CHECK_EQ_INT(ck_manifest_decode(plain, plain_len, &d), 0);
	CHECK(d && !d->has_last_pid);
	ck_manifest_free(d);
	d = NULL;
	m->has_last_pid = 1;
	m->last_pid = 4194000;
	CHECK_EQ_INT(ck_manifest_encode(m, &buf, &len), 0);
	CHECK_EQ_INT(len, plain_len + 16 + 8); /* section header + i32, u32 */
	CHECK_EQ_INT(ck_manifest_decode(buf, len, &d), 0);
	CHECK(d && d->has_last_pid && d->last_pid == 4194000);
	ck_manifest_free(d);
	d = NULL;
	free(buf);
	m->last_pid = 0;
	CHECK_EQ_INT(ck_manifest_encode(m, &buf, &len), 0);
	CHECK_EQ_INT(ck_manifest_decode(buf, len, &d), -EBADMSG);
	CHECK(strstr(ck_err_msg(), "last pid") != NULL);
	free(buf);
	free(plain);
	ck_manifest_free(m);
}

void ck_unit_run(void)
{
	test_roundtrip();
	test_clocks();
	test_lineage();
	test_last_pid();
	test_tree();
	test_files();
	test_golden();
	test_corruption();
	test_semantics();
	test_job_names();
	test_store_ops();
}
