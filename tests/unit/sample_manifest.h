/* A fixed manifest with every kind of field filled in, shared by the unit
 * tests and the program that wrote tests/golden/manifest-v1.bin. Changing
 * it changes the golden file: do not. */
#ifndef CK_UNIT_SAMPLE_MANIFEST_H
#define CK_UNIT_SAMPLE_MANIFEST_H

#include <stdlib.h>
#include <string.h>

#include "launcher/image/manifest.h"

static inline char *ck__sample_dup(const char *s)
{
	return s ? strdup(s) : NULL;
}

static inline struct ck_manifest *ck_unit_sample_manifest(void)
{
	struct ck_manifest *m = calloc(1, sizeof(*m));
	static const char *argv[] = {"./train", "--epochs", "90", ""};
	static const char *packs[] = {"packs/00000003-0001.pack", "packs/00000002-0001.pack"};
	size_t i;

	m->version = CK_MANIFEST_VERSION;
	m->seq = 3;
	m->time_ns = 1796000000123456789ull;
	m->duration_ns = 2500000000ull;
	m->frozen_ns = 1200000ull;
	m->logical_bytes = 3 * CK_CHUNK_SIZE + 4096;
	m->stored_bytes = 12345;
	m->job = ck__sample_dup("sgd-42");
	m->cwd = ck__sample_dup("/home/u/run");
	m->argc = 4;
	m->argv = calloc(m->argc, sizeof(char *));
	for (i = 0; i < m->argc; i++)
		m->argv[i] = ck__sample_dup(argv[i]);
	m->npacks = 2;
	m->packs = calloc(m->npacks, sizeof(char *));
	for (i = 0; i < m->npacks; i++)
		m->packs[i] = ck__sample_dup(packs[i]);
	m->nchunks = 4;
	m->chunks = calloc(m->nchunks, sizeof(*m->chunks));
	for (i = 0; i < m->nchunks; i++) {
		memset(m->chunks[i].hash, (int)(0x10 + i), CK_HASH_LEN);
		m->chunks[i].len = CK_CHUNK_SIZE;
	}
	m->chunks[0].clen = 1000;
	m->chunks[0].pack = 0;
	m->chunks[0].off = 0;
	m->chunks[1].flags = CK_CHUNK_ZERO;
	m->chunks[2].clen = CK_CHUNK_SIZE;
	m->chunks[2].flags = CK_CHUNK_RAW;
	m->chunks[2].pack = 1;
	m->chunks[2].off = 77777;
	m->chunks[3].len = 4096;
	m->chunks[3].clen = 30;
	m->chunks[3].off = 1000;
	m->nprocs = 2;
	m->procs = calloc(m->nprocs, sizeof(*m->procs));
	m->procs[0].pid = 1000;
	m->procs[0].ppid = 999;
	m->procs[0].exe = ck__sample_dup("/usr/bin/python3");
	m->procs[0].restart_entry = 0x7f0000001000ull;
	m->procs[0].restart_arg = 0x7f0000002000ull;
	m->procs[0].restart_stack = 0x7f0000010000ull;
	m->procs[0].desc_len = 5;
	m->procs[0].desc = malloc(5);
	memcpy(m->procs[0].desc, "\x01\x02\x00\xff\x7f", 5);
	m->procs[0].nregions = 3;
	m->procs[0].regions = calloc(3, sizeof(struct ck_region));
	m->procs[0].regions[0] = (struct ck_region){.start = 0x400000, .end = 0x4c0000, .prot = 5,
						    .flags = CK_REG_FILE, .file_off = 0, .dev = 0x803,
						    .ino = 4242, .first_chunk = 0, .nchunks = 3};
	m->procs[0].regions[0].path = ck__sample_dup("/usr/bin/python3");
	m->procs[0].regions[1] = (struct ck_region){.start = 0x5000000, .end = 0x5001000, .prot = 3,
						    .flags = CK_REG_HEAP, .first_chunk = 3, .nchunks = 1};
	m->procs[0].regions[1].path = ck__sample_dup("[heap]");
	m->procs[0].regions[2] = (struct ck_region){.start = 0x7ffff7fc1000, .end = 0x7ffff7fc3000, .prot = 5,
						    .flags = CK_REG_VDSO | CK_REG_NODATA};
	m->procs[0].regions[2].path = ck__sample_dup("[vdso]");
	m->procs[1].pid = 1001;
	m->procs[1].ppid = 1000;
	m->procs[1].exe = NULL;
	m->nskips = 1;
	m->skips = calloc(1, sizeof(*m->skips));
	m->skips[0].pid = 1000;
	m->skips[0].what = ck__sample_dup("/dev/nvidia0");
	m->skips[0].why = ck__sample_dup("device file: reopened by the cuda plugin");
	return m;
}

#endif
