/* Communicator attributes, kept in the program (they are the program's
 * state, and checkpointed with it later): user keyvals with their callbacks,
 * and the predefined attributes with the values the agent's real MPI gave
 * at MPI_Init. */
#include <string.h>

#include "plugins/mpi/standin/sti.h"

#define FIRST_USER_KEY 64 /* above every predefined keyval of Open MPI 4.1 */
#define MAX_KEYS 128

struct keyval {
	int used;
	MPI_Comm_copy_attr_function *copy;
	MPI_Comm_delete_attr_function *del;
	void *extra;
};

static struct keyval keys[MAX_KEYS];
static struct {
	int set;
	void *val;
} attrs[CK_MAX_COMMS][MAX_KEYS];

int OMPI_C_MPI_COMM_NULL_COPY_FN(MPI_Comm comm, int key, void *extra, void *in, void *out, int *flag)
{
	(void)comm, (void)key, (void)extra, (void)in, (void)out;
	*flag = 0;
	return MPI_SUCCESS;
}

int OMPI_C_MPI_COMM_DUP_FN(MPI_Comm comm, int key, void *extra, void *in, void *out, int *flag)
{
	(void)comm, (void)key, (void)extra;
	*(void **)out = in;
	*flag = 1;
	return MPI_SUCCESS;
}

int OMPI_C_MPI_COMM_NULL_DELETE_FN(MPI_Comm comm, int key, void *val, void *extra)
{
	(void)comm, (void)key, (void)val, (void)extra;
	return MPI_SUCCESS;
}

int MPI_Comm_create_keyval(MPI_Comm_copy_attr_function *copy, MPI_Comm_delete_attr_function *del, int *key,
			   void *extra)
{
	for (int i = FIRST_USER_KEY; i < MAX_KEYS; i++)
		if (!keys[i].used) {
			keys[i] = (struct keyval){ 1, copy, del, extra };
			*key = i;
			return MPI_SUCCESS;
		}
	ck__sti_die("MPI_Comm_create_keyval", "more than %d keyvals", MAX_KEYS - FIRST_USER_KEY);
}

static int user_key(int key)
{
	return key >= FIRST_USER_KEY && key < MAX_KEYS && keys[key].used;
}

int MPI_Comm_free_keyval(int *key)
{
	if (!user_key(*key))
		return MPI_ERR_KEYVAL;
	keys[*key].used = 0;
	*key = MPI_KEYVAL_INVALID;
	return MPI_SUCCESS;
}

int MPI_Comm_set_attr(MPI_Comm comm, int key, void *val)
{
	int c = ck__sti_comm("MPI_Comm_set_attr", comm), rc;

	if (!user_key(key))
		return MPI_ERR_KEYVAL;
	if (attrs[c][key].set && keys[key].del && (rc = keys[key].del(comm, key, attrs[c][key].val, keys[key].extra)))
		return rc;
	attrs[c][key].set = 1;
	attrs[c][key].val = val;
	return MPI_SUCCESS;
}

int MPI_Comm_get_attr(MPI_Comm comm, int key, void *val, int *flag)
{
	static int host = MPI_PROC_NULL, io = MPI_ANY_SOURCE, wtime_global = 0;
	int c = ck__sti_comm("MPI_Comm_get_attr", comm), *v = NULL;

	*flag = 0;
	if (user_key(key)) {
		if (attrs[c][key].set) {
			*(void **)val = attrs[c][key].val;
			*flag = 1;
		}
		return MPI_SUCCESS;
	}
	switch (key) {
	case MPI_TAG_UB: v = &ck__sti.tag_ub; break;
	case MPI_HOST: v = &host; break;
	case MPI_IO: v = &io; break;
	case MPI_WTIME_IS_GLOBAL: v = &wtime_global; break;
	case MPI_APPNUM: v = &ck__sti.appnum; break;
	case MPI_UNIVERSE_SIZE: v = &ck__sti.universe; break;
	case MPI_LASTUSEDCODE: v = &ck__sti.lastcode; break;
	default: return key >= 0 && key < FIRST_USER_KEY ? MPI_SUCCESS : MPI_ERR_KEYVAL;
	}
	if (*v != -1 || key == MPI_HOST || key == MPI_IO) {
		*(int **)val = v;
		*flag = 1;
	}
	return MPI_SUCCESS;
}

int MPI_Comm_delete_attr(MPI_Comm comm, int key)
{
	int c = ck__sti_comm("MPI_Comm_delete_attr", comm), rc;

	if (!user_key(key) || !attrs[c][key].set)
		return MPI_ERR_KEYVAL;
	if (keys[key].del && (rc = keys[key].del(comm, key, attrs[c][key].val, keys[key].extra)))
		return rc;
	attrs[c][key].set = 0;
	return MPI_SUCCESS;
}

int ck__sti_attr_copy(int old, int new_)
{
	MPI_Comm oc = ck__sti_comm_handle(old);
	void *out;
	int flag, rc;

	for (int k = FIRST_USER_KEY; k < MAX_KEYS; k++) {
		if (!keys[k].used || !attrs[old][k].set || !keys[k].copy)
			continue;
		flag = 0;
		rc = keys[k].copy(oc, k, keys[k].extra, attrs[old][k].val, &out, &flag);
		if (rc)
			return rc;
		if (flag) {
			attrs[new_][k].set = 1;
			attrs[new_][k].val = out;
		}
	}
	return MPI_SUCCESS;
}

void ck__sti_attr_delete_all(int c)
{
	MPI_Comm comm = ck__sti_comm_handle(c);

	for (int k = MAX_KEYS - 1; k >= FIRST_USER_KEY; k--)
		if (keys[k].used && attrs[c][k].set)
			MPI_Comm_delete_attr(comm, k);
}
