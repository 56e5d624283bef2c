/* ckpt checkpoint [--stop] JOB: asks the job's ckrun for a checkpoint. */
#include "launcher/ckpt/cli.h"

#include <errno.h>

#include "launcher/common/ck_err.h"
#include "launcher/common/ctl.h"

int ckpt_cmd_checkpoint(int argc, char **argv)
{
	struct ckpt_opts o;
	char reply[256], job[CK_JOB_NAME_MAX + 1];
	int i, rc;

	i = ckpt_getopts(argc, argv, CKPT_O_STOP, &o);
	if (i < 0)
		return CK_EXIT_USAGE;
	if (argc - i != 1)
		return ckpt_usage_error("checkpoint: expected one JOB");
	if (ck_job_name_encode(argv[i], job, sizeof(job)) < 0)
		return ckpt_usage_error("checkpoint: %s", ck_err_msg());
	rc = ck_ctl_request(job, o.stop ? "checkpoint-stop" : "checkpoint", reply, sizeof(reply));
	if (rc < 0) {
		fprintf(stderr, "ckpt: %s\n", ck_err_msg());
		if (rc == -EREMOTEIO || rc == -EPROTO)
			return CK_EXIT_INTERNAL;
		return rc == -EINVAL ? CK_EXIT_USAGE : CK_EXIT_STORE;
	}
	printf("checkpoint %s@%s committed%s\n", argv[i], reply, o.stop ? "; job stopping" : "");
	return 0;
}
