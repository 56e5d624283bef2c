/* Uses of the driver that a checkpoint cannot carry: memory shared with
 * other processes (IPC handles), managed memory (migrated by the driver
 * behind the program's back, with no device address the plugin owns),
 * graphs (their nodes hold handles the plugin does not virtualise), and
 * module globals (placed by the driver at load; cu_api_module.c). They
 * are allowed and counted; a round started while one is live fails with a
 * message naming it, and the job runs on. */
#include "cu_internal.h"

#include <errno.h>
#include <stdlib.h>

#include "cu_ckpt.h"

struct ptr_node {
	CUdeviceptr p;
	struct ptr_node *next;
};
static struct ptr_node *managed_list, *ipc_list;

static int list_add(struct ptr_node **l, CUdeviceptr p)
{
	struct ptr_node *n = malloc(sizeof(*n));

	if (!n)
		return -ENOMEM;
	n->p = p;
	pthread_mutex_lock(&ck_cu_lock);
	n->next = *l;
	*l = n;
	pthread_mutex_unlock(&ck_cu_lock);
	return 0;
}

static int list_del(struct ptr_node **l, CUdeviceptr p)
{
	struct ptr_node **np, *n;

	pthread_mutex_lock(&ck_cu_lock);
	for (np = l; (n = *np); np = &n->next)
		if (n->p == p) {
			*np = n->next;
			break;
		}
	pthread_mutex_unlock(&ck_cu_lock);
	free(n);
	return n != NULL;
}

/* cuMemFree of managed memory goes to the driver's own cuMemFree. */
int ck_cu_unsup_free(CUdeviceptr p, CUresult *r)
{
	if (!list_del(&managed_list, p))
		return 0;
	*r = ck_cu_d.cuMemFree(p);
	__atomic_fetch_sub(&ck_cu.managed, 1, __ATOMIC_SEQ_CST);
	return 1;
}

/* An exported allocation stops mattering once it is freed. */
void ck_cu_unsup_forget(CUdeviceptr p)
{
	while (list_del(&ipc_list, p))
		__atomic_fetch_sub(&ck_cu.ipc_exports, 1, __ATOMIC_SEQ_CST);
}

CK_CU_API CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	CK_ENTER;
	if (!ck_cu_d.cuMemAllocManaged)
		CK_LEAVE(CUDA_ERROR_NOT_SUPPORTED);
	if ((r = ck_cu_d.cuMemAllocManaged(dptr, bytesize, flags)) != CUDA_SUCCESS)
		CK_LEAVE(r);
	if (list_add(&managed_list, *dptr) < 0) {
		ck_cu_d.cuMemFree(*dptr);
		CK_LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
	}
	__atomic_fetch_add(&ck_cu.managed, 1, __ATOMIC_SEQ_CST);
	CK_LEAVE(CUDA_SUCCESS);
}

CK_CU_API CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
	CK_ENTER;
	if (!ck_cu_d.cuIpcGetMemHandle)
		CK_LEAVE(CUDA_ERROR_NOT_SUPPORTED);
	if ((r = ck_cu_d.cuIpcGetMemHandle(pHandle, dptr)) != CUDA_SUCCESS)
		CK_LEAVE(r);
	if (list_add(&ipc_list, dptr) == 0)
		__atomic_fetch_add(&ck_cu.ipc_exports, 1, __ATOMIC_SEQ_CST);
	CK_LEAVE(CUDA_SUCCESS);
}

CK_CU_API CUresult CUDAAPI cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
	CK_ENTER;
	if (!ck_cu_d.cuGraphCreate)
		CK_LEAVE(CUDA_ERROR_NOT_SUPPORTED);
	if ((r = ck_cu_d.cuGraphCreate(phGraph, flags)) == CUDA_SUCCESS)
		__atomic_fetch_add(&ck_cu.graphs, 1, __ATOMIC_SEQ_CST);
	CK_LEAVE(r);
}

CK_CU_API CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph)
{
	CK_ENTER;
	if (!ck_cu_d.cuGraphDestroy)
		CK_LEAVE(CUDA_ERROR_NOT_SUPPORTED);
	if ((r = ck_cu_d.cuGraphDestroy(hGraph)) == CUDA_SUCCESS)
		__atomic_fetch_sub(&ck_cu.graphs, 1, __ATOMIC_SEQ_CST);
	CK_LEAVE(r);
}

/* Called with the gate closed, at the start of a round. */
int ck_cu_unsupported_check(void)
{
	if (ck_cu.ipc_exports > 0) {
		ck_plugin_fail("CUDA IPC memory handle in use (cuIpcGetMemHandle on %d allocation%s)",
			       ck_cu.ipc_exports, ck_cu.ipc_exports > 1 ? "s" : "");
		return -ENOTSUP;
	}
	if (ck_cu.ipc_events > 0) {
		ck_plugin_fail("CUDA IPC event in use (cuEventCreate with CU_EVENT_INTERPROCESS: %d event%s)",
			       ck_cu.ipc_events, ck_cu.ipc_events > 1 ? "s" : "");
		return -ENOTSUP;
	}
	if (ck_cu.managed > 0) {
		ck_plugin_fail("CUDA managed memory in use (cuMemAllocManaged: %d allocation%s)", ck_cu.managed,
			       ck_cu.managed > 1 ? "s" : "");
		return -ENOTSUP;
	}
	for (struct ck_cu_mod *m = ck_cu.mods; m; m = m->next)
		if (m->globals) {
			ck_plugin_fail("CUDA module global in use (cuModuleGetGlobal): its device address "
				       "cannot be kept across a restart");
			return -ENOTSUP;
		}
	if (ck_cu.graphs > 0) {
		ck_plugin_fail("CUDA graph in use (cuGraphCreate: %d graph%s)", ck_cu.graphs,
			       ck_cu.graphs > 1 ? "s" : "");
		return -ENOTSUP;
	}
	return 0;
}
