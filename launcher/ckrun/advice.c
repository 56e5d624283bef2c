/* A mapping's madvise() advice, which /proc/PID/maps does not show: the
 * VmFlags line of /proc/PID/smaps. Read after RELEASE (smaps walks every
 * page table entry: about 15 ms a GiB of small pages here), from the
 * snapshot, which inherits its parent's flags, or from the live process of
 * a write-protect round (advice given after the cut is taken as given
 * before it: it changes no byte). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/common/ck_err.h"
#include "launcher/ckrun/ckrun.h"
#include "launcher/image/manifest.h"

static uint32_t ck__advice_flags(const char *vmflags)
{
	static const struct {
		char name[3];
		uint32_t flag;
	} known[] = {
		{"hg", CK_REG_ADV_HUGE},
		{"nh", CK_REG_ADV_NOHUGE},
		{"wf", CK_REG_ADV_WIPEONFORK},
		{"dd", CK_REG_ADV_DONTDUMP},
		{"nr", CK_REG_NORESERVE},
		{"dc", CK_REG_ADV_DONTFORK},
		{"rr", CK_REG_ADV_RANDOM},
		{"sr", CK_REG_ADV_SEQUENTIAL},
	};
	uint32_t f = 0;

	/* two-letter words separated by spaces */
	for (const char *p = vmflags; p[0] && p[1]; p++) {
		if (p[0] == ' ' || p[0] == '\n' || (p[2] && p[2] != ' ' && p[2] != '\n'))
			continue;
		for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
			if (p[0] == known[i].name[0] && p[1] == known[i].name[1])
				f |= known[i].flag;
		p++;
	}
	return f;
}

/* The first mapping of process pid whose advice holds flag (CK_REG_ADV_*):
 * 1 with its range, 0 if none, or -errno. */
int ck_maps_first_advised(pid_t pid, uint32_t flag, uint64_t *s, uint64_t *e)
{
	char path[64], *line = NULL;
	size_t cap = 0;
	uint64_t start = 0, end = 0;
	int r = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/smaps", pid);
	if (!(f = fopen(path, "re")))
		return -errno;
	while (!r && getline(&line, &cap, f) > 0) {
		if (!strncmp(line, "VmFlags:", 8) && (ck__advice_flags(line + 8) & flag)) {
			*s = start;
			*e = end;
			r = 1;
		} else if (line[0] && strchr("0123456789abcdef", line[0])) {
			sscanf(line, "%" SCNx64 "-%" SCNx64, &start, &end);
		}
	}
	free(line);
	fclose(f);
	return r;
}

int ck_maps_advice(pid_t pid, struct ck_region *rg, size_t n)
{
	char path[64], *line = NULL;
	size_t cap = 0, i = 0;
	uint64_t start = 0, end = 0;
	int have = 0, r = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/smaps", pid);
	f = fopen(path, "re");
	if (!f) {
		r = -errno;
		ck_err_set("cannot read %s: %s", path, strerror(errno));
		return r;
	}
	while (getline(&line, &cap, f) > 0) {
		if (!strncmp(line, "VmFlags:", 8)) {
			uint32_t adv = ck__advice_flags(line + 8);
			/* both lists ascend: a mapping gone since the listing is skipped */
			while (have && i < n && rg[i].end <= start)
				i++;
			/* a mapping split into runs (filepages.c) is several regions */
			for (size_t j = i; have && j < n && rg[j].start >= start && rg[j].end <= end; j++)
				rg[j].flags |= adv;
			have = 0;
		} else if (line[0] && strchr("0123456789abcdef", line[0])) { /* field names are capitalised */
			have = sscanf(line, "%" SCNx64 "-%" SCNx64, &start, &end) == 2;
		}
	}
	if (ferror(f)) {
		r = -EIO;
		ck_err_set("cannot read %s", path);
	}
	free(line);
	fclose(f);
	return r;
}
