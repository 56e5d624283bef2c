/* ckpt: entry point and the helpers every subcommand shares. */
#include "launcher/ckpt/cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "launcher/common/ck_err.h"

static const char ckpt_usage_text[] =
	"usage: ckpt COMMAND [OPTIONS] ARGS\n"
	"  checkpoint [--stop] JOB                   checkpoint a running job now (--stop: then stop it)\n"
	"  ls [--store URI] [--json] [JOB]           list jobs, or the checkpoints of JOB\n"
	"  verify [--store URI] [--json] JOB[@SEQ]   read and check every chunk of a checkpoint\n"
	"  inspect [--store URI] JOB[@SEQ]           show processes, regions and skipped items\n"
	"  inspect --backtrace [--store URI] JOB[@SEQ]  every thread's stack, with function names\n"
	"  export-core [--store URI] [--pid P] -o FILE JOB[@SEQ]  an ELF core file of a process for gdb\n"
	"  rm [--store URI] [--force] JOB[@SEQ]      delete one checkpoint, or all of JOB\n"
	"  gc [--store URI] [--keep N] [--force] JOB keep the newest N good ones, delete unreferenced packs\n"
	"  cp [--from-profile P] [--to-profile P] SRC_STORE DST_STORE JOB[@SEQ]\n"
	"                                            copy committed checkpoints between stores (only\n"
	"                                            the packs the destination lacks)\n"
	"  report [--store URI] JOB -o FILE.svg|FILE.png  a picture of the job's checkpoints and restores\n"
	"  unlock [--store URI] [--force] JOB        remove a stale lock of JOB (--force: a live S3 lease)\n"
	"rm and gc refuse a job that a running ckrun holds unless --force.\n"
	"The store is --store URI, else $CKPT_STORE, else ./ckpt-store; URIs are\n"
	"file:///DIR, a path, or s3://BUCKET/PREFIX (--s3-endpoint URL, --s3-ca FILE, --s3-profile P:\n"
	"credentials, endpoint_url, ca_bundle, region of section P of the shared credentials file).\n"
	"Exit status: 0 ok, 2 checkpoint corrupt or missing, 64 usage, 69 store problem or job held by\n"
	"another writer, 73 the output file (report -o, export-core -o) cannot be written.\n";

int ckpt_usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("ckpt: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (ckpt --help for usage)\n", stderr);
	return CK_EXIT_USAGE;
}

int ckpt_exit_status(int rc)
{
	switch (rc) {
	case 0:
		return CK_EXIT_OK;
	case -EBADMSG:
	case -ENOENT:
		return CK_EXIT_CORRUPT;
	case -EINVAL:
		return CK_EXIT_USAGE;
	case -ENOMEM:
		return CK_EXIT_INTERNAL;
	default:
		return CK_EXIT_STORE;
	}
}

int ckpt_fail(int rc)
{
	fprintf(stderr, "ckpt: %s\n", ck_err_msg());
	return ckpt_exit_status(rc);
}

int ckpt_getopts(int argc, char **argv, unsigned allowed, struct ckpt_opts *o)
{
	static const struct option all[] = {
		{"store", required_argument, NULL, 's'},   {"s3-endpoint", required_argument, NULL, 'E'},
		{"s3-ca", required_argument, NULL, 'C'},   {"json", no_argument, NULL, 'j'},
		{"stop", no_argument, NULL, 'S'},          {"keep", required_argument, NULL, 'k'},
		{"force", no_argument, NULL, 'f'},         {"backtrace", no_argument, NULL, 'b'},
		{"pid", required_argument, NULL, 'p'},     {"output", required_argument, NULL, 'o'},
		{"sign-key", required_argument, NULL, 'K'}, {"s3-profile", required_argument, NULL, 'P'},
		{"from-profile", required_argument, NULL, 'F'}, {"to-profile", required_argument, NULL, 'T'},
		{NULL, 0, NULL, 0},
	};
	int c;

	memset(o, 0, sizeof(*o));
	o->keep = -1;
	o->pid = -1;
	optind = 0; /* full re-initialisation of getopt */
	opterr = 0;
	while ((c = getopt_long(argc, argv, "o:", all, NULL)) != -1) {
		unsigned need = c == 's' || c == 'E' || c == 'C' || c == 'K' || c == 'P' ? CKPT_O_STORE
				: c == 'F' || c == 'T'			 ? CKPT_O_SITES
				: c == 'j'			 ? CKPT_O_JSON
				: c == 'S'			 ? CKPT_O_STOP
				: c == 'k'			 ? CKPT_O_KEEP
				: c == 'f'			 ? CKPT_O_FORCE
				: c == 'b'			 ? CKPT_O_BACKTRACE
				: c == 'p'			 ? CKPT_O_PID
				: c == 'o'			 ? CKPT_O_OUTPUT
								 : 0;

		if (c == '?' || c == ':' || !(allowed & need)) {
			ckpt_usage_error("%s: unknown or incomplete option %s", argv[0], argv[optind - 1]);
			return -1;
		}
		switch (c) {
		case 's': o->store = optarg; break;
		case 'E': o->sopts.s3_endpoint = optarg; break;
		case 'C': o->sopts.s3_ca = optarg; break;
		case 'P': o->sopts.s3_profile = optarg; break;
		case 'F': o->from_profile = optarg; break;
		case 'T': o->to_profile = optarg; break;
		case 'j': o->json = 1; break;
		case 'S': o->stop = 1; break;
		case 'f': o->force = 1; break;
		case 'K':
			/* every manifest read must carry this key's signature */
			if (ck_manifest_sign_key_load(optarg) < 0) {
				ckpt_usage_error("%s: %s", argv[0], ck_err_msg());
				return -1;
			}
			break;
		case 'b': o->backtrace = 1; break;
		case 'o': o->output = optarg; break;
		case 'p': {
			char *end;

			errno = 0;
			o->pid = strtol(optarg, &end, 10);
			if (errno || *end || !*optarg || o->pid < 1 || o->pid > 0x3fffffff) {
				ckpt_usage_error("%s: --pid needs a process id, not \"%s\"", argv[0], optarg);
				return -1;
			}
			break;
		}
		case 'k': {
			char *end;

			errno = 0;
			o->keep = strtol(optarg, &end, 10);
			if (errno || *end || o->keep < 1 || o->keep > 1000000) {
				ckpt_usage_error("%s: --keep needs a number of checkpoints >= 1, not \"%s\"", argv[0],
						 optarg);
				return -1;
			}
			break;
		}
		}
	}
	if (!o->store)
		o->store = getenv("CKPT_STORE");
	if (!o->store || !*o->store)
		o->store = "./ckpt-store";
	return optind;
}

int ckpt_open_store(const char *uri, const struct ck_store_opts *so, int must_exist, struct ck_store **s)
{
	int rc = ck_store_open(uri, so, s);

	/* A store that is not there is the store's problem (69), not a job
	 * without checkpoints (2): a misspelt path must not look empty. */
	if (rc == 0 && must_exist && (rc = ck_store_probe(*s)) < 0) {
		ck_store_close(*s);
		*s = NULL;
		if (rc == -ENOENT)
			rc = -ENXIO;
	}
	return rc;
}

int ckpt_parse_ref(const char *arg, char *job, size_t len, uint64_t *seq)
{
	const char *at = strrchr(arg, '@');
	char name[4 * CK_JOB_NAME_MAX];
	size_t n;

	/* JOB@SEQ; an '@' not followed by digits alone is part of the name. */
	if (at && at[1] && at[1 + strspn(at + 1, "0123456789")])
		at = NULL;
	n = at ? (size_t)(at - arg) : strlen(arg);
	*seq = 0;
	if (n >= sizeof(name)) {
		ck_err_set("job name too long: %s", arg);
		return -EINVAL;
	}
	memcpy(name, arg, n);
	name[n] = 0;
	if (ck_job_name_encode(name, job, len) < 0)
		return -EINVAL;
	if (at) {
		char *end;

		errno = 0;
		*seq = strtoull(at + 1, &end, 10);
		if (errno || *end || !at[1] || *seq == 0 || at[1] == '-' || at[1] == '+') {
			ck_err_set("invalid checkpoint \"%s\" (expected JOB@SEQ with SEQ >= 1)", arg);
			return -EINVAL;
		}
	}
	return 0;
}

int ckpt_load(struct ck_store *s, const char *job, uint64_t seq, struct ck_manifest **m)
{
	if (seq)
		return ck_manifest_load(s, job, seq, m);
	return ck_manifest_load_latest(s, job, m);
}

void ckpt_fmt_time(uint64_t ns, char *buf, size_t len)
{
	time_t t = (time_t)(ns / 1000000000ull);
	struct tm tm;

	if (!ns || !gmtime_r(&t, &tm) || !strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm))
		snprintf(buf, len, "-");
}

void ckpt_fmt_duration(uint64_t ns, char *buf, size_t len)
{
	if (ns < 1000000000ull)
		snprintf(buf, len, "%.1fms", (double)ns / 1e6);
	else
		snprintf(buf, len, "%.2fs", (double)ns / 1e9);
}

void ckpt_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static const struct {
	const char *name;
	int (*fn)(int, char **);
} ckpt_cmds[] = {
	{"checkpoint", ckpt_cmd_checkpoint}, {"ls", ckpt_cmd_ls}, {"verify", ckpt_cmd_verify},
	{"inspect", ckpt_cmd_inspect},       {"rm", ckpt_cmd_rm}, {"gc", ckpt_cmd_gc},
	{"cp", ckpt_cmd_cp},                 {"unlock", ckpt_cmd_unlock},
	{"export-core", ckpt_cmd_export_core}, {"report", ckpt_cmd_report},
};

int main(int argc, char **argv)
{
	size_t i;

	if (argc < 2)
		return ckpt_usage_error("no command given");
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		fputs(ckpt_usage_text, stdout);
		return 0;
	}
	for (i = 0; i < sizeof(ckpt_cmds) / sizeof(ckpt_cmds[0]); i++)
		if (!strcmp(argv[1], ckpt_cmds[i].name))
			return ckpt_cmds[i].fn(argc - 1, argv + 1);
	return ckpt_usage_error("unknown command \"%s\"", argv[1]);
}
