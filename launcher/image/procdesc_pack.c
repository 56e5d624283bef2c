/* The process descriptor's compact form in manifests: the fixed header,
 * then only the used threads, fds and epoll items. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/common/ck_err.h"
#include "launcher/image/procdesc_pack.h"

int ck_desc_pack(const struct ck_procdesc *pd, uint8_t **out, size_t *len)
{
	size_t th = sizeof(pd->threads[0]) * pd->nthreads, fd = sizeof(pd->fds[0]) * pd->nfds,
	       ep = sizeof(pd->epitems[0]) * pd->nepitems;
	uint8_t *b;

	if (pd->nthreads > CK_PD_MAX_THREADS || pd->nfds > CK_PD_MAX_FDS || pd->nepitems > CK_PD_MAX_EPITEMS)
		return -EINVAL;
	b = malloc(CK_PD_HDR_SIZE + th + fd + ep);
	if (!b)
		return -ENOMEM;
	memcpy(b, pd, CK_PD_HDR_SIZE);
	memcpy(b + CK_PD_HDR_SIZE, pd->threads, th);
	memcpy(b + CK_PD_HDR_SIZE + th, pd->fds, fd);
	memcpy(b + CK_PD_HDR_SIZE + th + fd, pd->epitems, ep);
	*out = b;
	*len = CK_PD_HDR_SIZE + th + fd + ep;
	return 0;
}

int ck_desc_unpack(const uint8_t *buf, size_t len, struct ck_procdesc **out)
{
	struct ck_procdesc *pd;
	size_t th, fd, ep;

	if (len < CK_PD_HDR_SIZE) {
		ck_err_set("process descriptor truncated (%zu bytes)", len);
		return -EBADMSG;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return -ENOMEM;
	memcpy(pd, buf, CK_PD_HDR_SIZE);
	if (pd->magic != CK_PD_MAGIC) {
		ck_err_set("process descriptor: bad magic");
		goto bad;
	}
	if (pd->version != CK_PD_VERSION) {
		/* the image holds its own libckpt, whose restart code speaks its
		 * version's protocol: another version restores with its own ckrun */
		ck_err_set("process descriptor version %u: written by %s ckrun (this one reads version %u); restore "
			   "it with the ckrun that wrote it", pd->version, pd->version < CK_PD_VERSION ? "an older" : "a newer",
			   CK_PD_VERSION);
		goto bad;
	}
	if (pd->size != sizeof(*pd)) {
		ck_err_set("process descriptor written by another libckpt layout (%u bytes, this one %zu)", pd->size,
			   sizeof(*pd));
		goto bad;
	}
	if (pd->nthreads > CK_PD_MAX_THREADS || pd->nfds > CK_PD_MAX_FDS || pd->nepitems > CK_PD_MAX_EPITEMS)
		goto badcount;
	th = sizeof(pd->threads[0]) * pd->nthreads;
	fd = sizeof(pd->fds[0]) * pd->nfds;
	ep = sizeof(pd->epitems[0]) * pd->nepitems;
	if (len != CK_PD_HDR_SIZE + th + fd + ep)
		goto badcount;
	memcpy(pd->threads, buf + CK_PD_HDR_SIZE, th);
	memcpy(pd->fds, buf + CK_PD_HDR_SIZE + th, fd);
	memcpy(pd->epitems, buf + CK_PD_HDR_SIZE + th + fd, ep);
	for (uint32_t i = 0; i < pd->nfds; i++)
		pd->fds[i].path[CK_PD_PATH - 1] = 0;
	pd->exe[CK_PD_PATH - 1] = 0;
	pd->cwd[CK_PD_PATH - 1] = 0;
	*out = pd;
	return 0;
badcount:
	ck_err_set("process descriptor: counts do not match its size");
bad:
	free(pd);
	return -EBADMSG;
}
